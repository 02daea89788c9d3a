import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MESSAGE_PREFIX, ONE_LINE_CHARS, SHOW_OUTPUT, messageView, needsExpanding, prefixed, serverMessageLevel } from '../../src/common/messages';

const NO_GPU =
    'cuda-llm: cannot benchmark saxpy: no GPU (no CUDA driver: "cuda" is an NVIDIA driver library and can only be found via system search. Ensure the NVIDIA display driver is installed.)';

describe('messages', () => {
    it('have one prefix, the server\'s, exactly once', () => {
        assert.equal(MESSAGE_PREFIX, 'cuda-llm: ');
        assert.equal(prefixed('no suggestion is pending'), 'cuda-llm: no suggestion is pending');
        assert.equal(prefixed('cuda-llm: saxpy: 2.00× faster'), 'cuda-llm: saxpy: 2.00× faster');
        assert.equal(messageView('info', '  API key stored  ').text, 'cuda-llm: API key stored');
    });

    it('longer than a line get a button, so VS Code shows them in full (the no-GPU warning was cut off)', () => {
        const view = messageView('warning', NO_GPU);
        assert.equal(view.text, NO_GPU);
        assert.deepEqual(view.items, [SHOW_OUTPUT]);
        assert.ok(needsExpanding('cuda-llm: a\nb'));
        assert.ok(!needsExpanding('x'.repeat(ONE_LINE_CHARS)));
    });

    it('that fit on a line stay as they are; buttons given are kept', () => {
        assert.deepEqual(messageView('info', 'API key stored').items, []);
        assert.deepEqual(messageView('error', NO_GPU, ['Open Settings']).items, ['Open Settings']);
    });

    it('from the server: errors, warnings and infos are shown, log and debug only logged', () => {
        assert.deepEqual([1, 2, 3, 4, 5].map(serverMessageLevel), ['error', 'warning', 'info', undefined, undefined]);
    });
});
