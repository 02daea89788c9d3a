import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
    SHOW_DIFF_COMMAND_TITLE,
    Suggestion,
    SuggestionStore,
    diffTitle,
    figures,
    formatMs,
    formatSpeedup,
    notificationText,
    parseSuggestion,
    parseSuggestionDocPath,
    refusalText,
    serverNote,
    staleReason,
    suggestionDocUri,
    suggestionLogLine,
    timings,
} from '../../src/common/suggestion';

const PARAMS = {
    uri: 'file:///w/saxpy.cu',
    kernel: 'saxpy',
    range: { start: { line: 10, character: 0 }, end: { line: 14, character: 1 } },
    original: '__global__ void saxpy() { slow(); }',
    suggested: '__global__ void saxpy() { fast(); }',
    speedup: 2.1,
    baselineMs: 0.42,
    bestMs: 0.2,
    casesPassed: 4,
    casesTotal: 4,
    message: 'vectorised loads',
};

function parsed(raw: unknown = PARAMS): Suggestion {
    const r = parseSuggestion(raw);
    assert.ok(r.ok, r.ok ? '' : r.error);
    return r.value;
}

describe('parsing cudaLlm/suggestion', () => {
    it('keeps every field of the contract', () => {
        assert.deepEqual(parsed(), PARAMS);
    });

    it("shows a demo's label with the figures, so recorded figures never pass for measured ones", () => {
        const s = parsed({ ...PARAMS, label: 'DEMO: recorded, not measured' });
        assert.match(notificationText(s), /^cuda-llm \[DEMO: recorded, not measured\]: saxpy \d/);
        assert.match(diffTitle(s), /^\[DEMO: recorded, not measured\] saxpy: original/);
        assert.ok(!notificationText(parsed()).includes('DEMO'));
    });

    it('accepts a null range (the kernel moved or changed since the run)', () => {
        assert.equal(parsed({ ...PARAMS, range: null }).range, null);
        assert.equal(parsed({ ...PARAMS, range: undefined }).range, null);
    });

    it('tolerates missing figures', () => {
        const s = parsed({ ...PARAMS, speedup: null, baselineMs: undefined, casesPassed: -1, message: '  ' });
        assert.equal(s.speedup, undefined);
        assert.equal(s.baselineMs, undefined);
        assert.equal(s.casesPassed, undefined);
        assert.equal(s.message, undefined);
    });

    it('rejects params without the texts, names or range', () => {
        for (const bad of [
            null,
            'x',
            { ...PARAMS, uri: 3 },
            { ...PARAMS, kernel: '' },
            { ...PARAMS, suggested: undefined },
            { ...PARAMS, range: { start: { line: 1, character: 0 } } },
            { ...PARAMS, range: { start: { line: -1, character: 0 }, end: { line: 2, character: 0 } } },
        ]) {
            const r = parseSuggestion(bad);
            assert.equal(r.ok, false, JSON.stringify(bad));
            assert.match(r.ok ? '' : r.error, /cudaLlm\/suggestion params/);
        }
    });
});

describe('figures', () => {
    it('format speedups and latencies readably', () => {
        assert.equal(formatSpeedup(2.1), '2.10×');
        assert.equal(formatSpeedup(1.8), '1.80×');
        assert.equal(formatSpeedup(123.4), '123×');
        assert.equal(formatMs(0.42), '420 µs');
        assert.equal(formatMs(0.0125), '12.5 µs');
        assert.equal(formatMs(3.14159), '3.14 ms');
        assert.equal(formatMs(250), '250 ms');
        assert.equal(formatMs(1250), '1.25 s');
    });

    it('title the diff like "saxpy: original ↔ suggested (2.10× faster, 4/4 cases)"', () => {
        assert.equal(diffTitle(parsed()), 'saxpy: original ↔ suggested (2.10× faster, 4/4 cases)');
        assert.equal(diffTitle(parsed({ ...PARAMS, speedup: undefined, casesTotal: undefined })), 'saxpy: original ↔ suggested');
        assert.equal(figures(parsed({ ...PARAMS, speedup: 0.9, casesPassed: 3 })), '0.90× (slower), 3/4 cases');
    });

    it('say the figures once, in one format, on one line of the notification', () => {
        assert.equal(notificationText(parsed()), 'cuda-llm: saxpy 2.10× faster (420 µs → 200 µs), 4/4 cases');
        assert.ok(notificationText(parsed()).length <= 60, 'fits the one line a notification without buttons shows');
        assert.equal(
            notificationText(parsed({ ...PARAMS, speedup: undefined, bestMs: undefined, casesTotal: undefined, message: undefined })),
            'cuda-llm: a suggested saxpy',
        );
        assert.equal(notificationText(parsed({ ...PARAMS, bestMs: undefined })), 'cuda-llm: saxpy 2.10× faster, 4/4 cases');
        assert.equal(timings(parsed()), '420 µs → 200 µs');
    });

    it('keep only what the server\'s message adds to the figures', () => {
        const server = '2.10x faster (0.4200 ms -> 0.2000 ms), 4/4 cases, re-validated on new inputs (round 1 candidate 2)';
        assert.equal(serverNote(server), 're-validated on new inputs (round 1 candidate 2)');
        assert.equal(serverNote('2.00x faster (1.0000 ms -> 0.5000 ms)'), undefined);
        assert.equal(serverNote('vectorised loads'), 'vectorised loads');
        assert.equal(serverNote(undefined), undefined);
        const line = suggestionLogLine(parsed({ ...PARAMS, message: server }));
        assert.equal(line, 'Suggestion for saxpy in file:///w/saxpy.cu: saxpy 2.10× faster (420 µs → 200 µs), 4/4 cases; re-validated on new inputs (round 1 candidate 2)');
        assert.equal(line.match(/faster/g)?.length, 1, 'the figures once');
    });
});

describe('accepting a stale suggestion', () => {
    const s = (): Suggestion => parsed();
    const file = (kernel: string): string => `#include <cstdio>\n${kernel}\nint main() {}\n`;

    it('is fine while the document still holds the original kernel (or is not open)', () => {
        assert.equal(staleReason(s(), file(PARAMS.original)), undefined);
        assert.equal(staleReason(s(), undefined), undefined);
    });

    it('is refused with the reason and the command the extension shows', () => {
        const reason = staleReason(s(), file('__global__ void saxpy() { slow(); /* edited */ }'));
        assert.ok(reason);
        assert.match(reason, /^saxpy changed since the optimization started, so the suggestion was not applied/);
        assert.match(reason, /"CUDA-LLM: Show Suggestion Diff"/);
        assert.doesNotMatch(reason, /Show suggested saxpy/);
    });

    it('from the server gets the same advice when the kernel changed, and a full stop otherwise', () => {
        assert.equal(
            refusalText('saxpy changed since the optimization started, so the suggestion was not applied (it would not fit the new text)'),
            staleReason(s(), 'edited'),
        );
        assert.equal(refusalText('there is no suggestion for saxpy to accept'), 'there is no suggestion for saxpy to accept.');
    });
});

describe('virtual documents', () => {
    it('round-trip id and side through the URI path', () => {
        const uri = suggestionDocUri(7, 'saxpy', 'suggested');
        assert.equal(uri, 'cuda-llm-suggestion:/7/saxpy.suggested.cu');
        assert.deepEqual(parseSuggestionDocPath('/7/saxpy.suggested.cu'), { id: 7, side: 'suggested' });
        assert.deepEqual(parseSuggestionDocPath(new URL(suggestionDocUri(12, 'k', 'original')).pathname), { id: 12, side: 'original' });
    });

    it('keep odd kernel names path-safe', () => {
        const uri = suggestionDocUri(3, 'gemm<float, 16>', 'original');
        assert.equal(uri, 'cuda-llm-suggestion:/3/gemm_float_16_.original.cu');
        assert.deepEqual(parseSuggestionDocPath(uri.slice('cuda-llm-suggestion:'.length)), { id: 3, side: 'original' });
    });

    it('ignore foreign paths', () => {
        assert.equal(parseSuggestionDocPath('/w/saxpy.cu'), undefined);
        assert.equal(parseSuggestionDocPath('/x/saxpy.suggested.cu'), undefined);
    });
});

describe('suggestion store', () => {
    it('serves both sides of the latest suggestion per kernel', () => {
        const store = new SuggestionStore();
        const first = store.put(parsed());
        const second = store.put(parsed({ ...PARAMS, suggested: 'newer' }));
        assert.ok(second.id > first.id);
        assert.equal(store.content(`/${second.id}/saxpy.suggested.cu`), 'newer');
        assert.equal(store.content(`/${second.id}/saxpy.original.cu`), PARAMS.original);
        assert.equal(store.content(`/${first.id}/saxpy.suggested.cu`), undefined, 'a replaced suggestion is gone');
    });

    it('lists pending suggestions newest first, per document, and forgets removed ones', () => {
        const store = new SuggestionStore();
        store.put(parsed());
        store.put(parsed({ ...PARAMS, kernel: 'other' }));
        store.put(parsed({ ...PARAMS, uri: 'file:///w/b.cu' }));
        assert.deepEqual(
            store.pending('file:///w/saxpy.cu').map((s) => s.suggestion.kernel),
            ['other', 'saxpy'],
        );
        assert.equal(store.pending().length, 3);
        assert.equal(store.remove({ uri: PARAMS.uri, kernel: 'saxpy' })?.suggestion.kernel, 'saxpy');
        assert.equal(store.get({ uri: PARAMS.uri, kernel: 'saxpy' }), undefined);
        assert.equal(store.pending().length, 2);
        store.clear();
        assert.deepEqual(store.pending(), []);
    });
});

describe('the command named in messages', () => {
    it('is the Show Suggestion Diff command as the palette shows it', () => {
        const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '../../../package.json'), 'utf8'));
        const command = manifest.contributes.commands.find((c: { command: string }) => c.command === 'cudaLlm.client.showSuggestion');
        assert.equal(SHOW_DIFF_COMMAND_TITLE, `${command.category}: ${command.title}`);
    });
});
