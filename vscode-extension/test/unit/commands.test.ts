import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
    ClientCommand,
    ServerCommand,
    acceptArgs,
    acceptRefused,
    cancelAllArgs,
    endsWithSuggestion,
    jobToken,
    isKernelRef,
    kernelAt,
    kernelArgs,
    kernelKey,
    kernelsFromLenses,
    refusalReason,
    scanKernels,
} from '../../src/common/commands';

const URI = 'file:///w/saxpy.cu';

describe('command ids', () => {
    it('match the server contract', () => {
        assert.deepEqual(Object.values(ServerCommand).sort(), [
            'cudaLlm.accept',
            'cudaLlm.addSpec',
            'cudaLlm.benchmark',
            'cudaLlm.cancel',
            'cudaLlm.demoExample',
            'cudaLlm.optimize',
            'cudaLlm.profile',
            'cudaLlm.reject',
            'cudaLlm.showSuggestion',
        ]);
    });

    it('never clash between client and server', () => {
        const server = new Set<string>(Object.values(ServerCommand));
        for (const id of Object.values(ClientCommand)) {
            assert.ok(id.startsWith('cudaLlm.client.'), id);
            assert.ok(!server.has(id), id);
        }
    });
});

describe('command arguments', () => {
    it('are one {uri, kernel} object for per-kernel commands', () => {
        assert.deepEqual(kernelArgs(URI, 'saxpy'), [{ uri: URI, kernel: 'saxpy' }]);
    });

    it('refuse an empty uri or kernel', () => {
        assert.throws(() => kernelArgs('', 'saxpy'), /URI and a kernel/);
        assert.throws(() => kernelArgs(URI, ''), /URI and a kernel/);
    });

    it('are empty for cancel-all', () => {
        assert.deepEqual(cancelAllArgs(), []);
    });

    it('recognise kernel refs', () => {
        assert.ok(isKernelRef({ uri: URI, kernel: 'k', extra: 1 }));
        assert.ok(!isKernelRef({ uri: URI }));
        assert.ok(!isKernelRef({ uri: URI, kernel: '' }));
        assert.ok(!isKernelRef(null));
        assert.ok(!isKernelRef('saxpy'));
        assert.notEqual(kernelKey({ uri: URI, kernel: 'a' }), kernelKey({ uri: URI, kernel: 'b' }));
    });

    it('read a refused accept from the server result', () => {
        assert.ok(acceptRefused(false));
        assert.ok(acceptRefused({ applied: false, message: 'changed' }));
        assert.ok(!acceptRefused(true));
        assert.ok(!acceptRefused(null));
        assert.ok(!acceptRefused(undefined));
        assert.ok(!acceptRefused({ applied: true }));
    });

    it('Accept says the user confirmed it in the diff, so the server applies it in one step', () => {
        assert.deepEqual(acceptArgs(URI, 'saxpy'), [{ uri: URI, kernel: 'saxpy', confirmed: true }]);
        assert.throws(() => acceptArgs('', 'saxpy'));
    });

    it('reads the reason of a refused Accept, when the server gives one', () => {
        assert.equal(refusalReason({ applied: false, reason: ' saxpy changed ' }), 'saxpy changed');
        assert.equal(refusalReason({ applied: false }), undefined);
        assert.equal(refusalReason(false), undefined);
        assert.equal(refusalReason({ applied: false, reason: '' }), undefined);
    });
});

describe('job results', () => {
    it('give the progress token of a started job', () => {
        assert.equal(jobToken({ token: 'cuda-llm-optimize-1a2b' }), 'cuda-llm-optimize-1a2b');
        assert.equal(jobToken(null), undefined, 'a job already running for the kernel');
        assert.equal(jobToken({ token: 3 }), undefined);
        assert.equal(jobToken(true), undefined);
    });

    it('tell an optimization that ended with a suggestion', () => {
        assert.ok(endsWithSuggestion('2.10× faster, 4/4 cases: suggestion ready'));
        assert.ok(!endsWithSuggestion('no correct candidate faster than the original'));
        assert.ok(!endsWithSuggestion('cancelled'));
        assert.ok(!endsWithSuggestion(undefined));
    });
});

describe('kernels from code lenses', () => {
    const lens = (line: number, command: string, arg: unknown) => ({
        range: { start: { line } },
        command: { command, arguments: [arg] },
    });

    it('keeps one entry per kernel of this document, in line order', () => {
        const kernels = kernelsFromLenses(
            [
                lens(20, 'cudaLlm.optimize', { uri: URI, kernel: 'b' }),
                lens(20, 'cudaLlm.benchmark', { uri: URI, kernel: 'b' }),
                lens(3, 'cudaLlm.optimize', { uri: URI, kernel: 'a' }),
                lens(9, 'cudaLlm.optimize', { uri: 'file:///other.cu', kernel: 'c' }),
                lens(11, 'other.command', { uri: URI, kernel: 'd' }),
                { range: { start: { line: 12 } } },
            ],
            URI,
        );
        assert.deepEqual(kernels, [
            { kernel: 'a', line: 3 },
            { kernel: 'b', line: 20 },
        ]);
    });
});

describe('kernel scan', () => {
    it('finds __global__ kernels with their declaration line', () => {
        const text = [
            '#include <cuda.h>',
            '/* __global__ void commented(int x) {} */',
            'extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {',
            '}',
            '// __global__ void alsoCommented() {}',
            'template <int B>',
            '__global__ void __launch_bounds__(256)',
            'reduce(const float* in, float* out) {}',
            '__device__ float helper(float x) { return x; }',
        ].join('\n');
        assert.deepEqual(scanKernels(text), [
            { kernel: 'saxpy', line: 2 },
            { kernel: 'reduce', line: 7 },
        ]);
    });

    it('finds nothing in host-only code', () => {
        assert.deepEqual(scanKernels('int main() { return 0; }'), []);
    });
});

describe('kernel at the cursor', () => {
    const kernels = [
        { kernel: 'a', line: 5 },
        { kernel: 'b', line: 30 },
    ];

    it('is the last kernel declared at or above the cursor', () => {
        assert.equal(kernelAt(kernels, 5)?.kernel, 'a');
        assert.equal(kernelAt(kernels, 29)?.kernel, 'a');
        assert.equal(kernelAt(kernels, 30)?.kernel, 'b');
        assert.equal(kernelAt(kernels, 400)?.kernel, 'b');
    });

    it('is the first kernel when the cursor is above all of them (its spec comment)', () => {
        assert.equal(kernelAt(kernels, 0)?.kernel, 'a');
    });

    it('is undefined without kernels', () => {
        assert.equal(kernelAt([], 3), undefined);
    });
});
