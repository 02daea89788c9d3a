import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JobTracker, jobKind, parseSpeedup, statusView } from '../../src/common/status';

const RUNNING = { kind: 'running' } as const;

describe('speedups in progress messages', () => {
    it('prefer the best one named', () => {
        assert.equal(parseSpeedup('round 2/4: candidate 3 1.2×, best 1.83×'), 1.83);
        assert.equal(parseSpeedup('best so far: 2.5x'), 2.5);
        assert.equal(parseSpeedup('candidate 1: 1.1×, candidate 2: 1.4×'), 1.4);
        assert.equal(parseSpeedup('round 1/4: compiling 4 candidates'), undefined);
        assert.equal(parseSpeedup(undefined), undefined);
    });
});

describe('job kinds', () => {
    it('come from the progress title', () => {
        assert.equal(jobKind('Optimizing saxpy'), 'optimizing');
        assert.equal(jobKind('Optimising saxpy'), 'optimizing');
        assert.equal(jobKind('Benchmark saxpy'), 'benchmarking');
        assert.equal(jobKind('Compiling'), 'running');
    });
});

describe('job tracker', () => {
    it('follows begin, report and end per token and keeps the best speedup', () => {
        const jobs = new JobTracker();
        assert.ok(jobs.update('a', { kind: 'begin', title: 'Optimizing saxpy', cancellable: true }));
        assert.ok(jobs.update(7, { kind: 'begin', title: 'Benchmark gemm', cancellable: false, message: 'warming up' }));
        jobs.update('a', { kind: 'report', message: 'round 1/4: best 1.40×', percentage: 25 });
        jobs.update('a', { kind: 'report', message: 'round 2/4: no better candidate' });
        assert.equal(jobs.all().find((j) => j.token === 'a')?.best, 1.4);
        assert.equal(jobs.all().find((j) => j.token === 'a')?.percentage, 25);
        assert.deepEqual(jobs.cancellableTokens(), ['a']);
        assert.ok(jobs.update(7, { kind: 'end' }));
        assert.deepEqual(
            jobs.all().map((j) => j.token),
            ['a'],
        );
        assert.ok(!jobs.update('unknown', { kind: 'report', message: 'x' }), 'a report without begin is ignored');
        assert.ok(!jobs.update('unknown', { kind: 'end' }));
    });

    it('counts a suggestion’s speedup for running optimizations', () => {
        const jobs = new JobTracker();
        jobs.update('a', { kind: 'begin', title: 'Optimizing saxpy' });
        jobs.noteSpeedup(2.1);
        assert.equal(jobs.all()[0].best, 2.1);
        jobs.clear();
        assert.deepEqual(jobs.all(), []);
    });
});

describe('status bar', () => {
    it('shows the count and the best speedup while optimizations run, and cancels on click', () => {
        const jobs = new JobTracker();
        jobs.update('a', { kind: 'begin', title: 'Optimizing saxpy', cancellable: true });
        jobs.update('b', { kind: 'begin', title: 'Optimizing gemm', cancellable: true, message: 'round 1/4' });
        jobs.update('b', { kind: 'report', message: 'round 2/4: best 1.8×' });
        const view = statusView(jobs.all(), RUNNING);
        assert.equal(view.text, '$(sync~spin) CUDA-LLM: 2 optimizing · best 1.80×');
        assert.equal(view.action, 'cancel');
        assert.ok(view.busy);
        assert.match(view.tooltip, /Optimizing saxpy/);
        assert.match(view.tooltip, /Optimizing gemm — round 2\/4: best 1\.8×/);
        assert.match(view.tooltip, /Click to cancel all/);
    });

    it('names mixed jobs and leaves out an unknown best', () => {
        const jobs = new JobTracker();
        jobs.update('a', { kind: 'begin', title: 'Optimizing saxpy' });
        jobs.update('b', { kind: 'begin', title: 'Benchmarking gemm' });
        assert.equal(statusView(jobs.all(), RUNNING).text, '$(sync~spin) CUDA-LLM: 1 optimizing, 1 benchmarking');
    });

    it('is idle, starting, stopped or failed without jobs, and then shows the log on click', () => {
        const idle = statusView([], RUNNING);
        assert.equal(idle.text, '$(zap) CUDA-LLM');
        assert.equal(idle.action, 'showOutput');
        assert.ok(!idle.busy && !idle.error);
        assert.equal(statusView([], { kind: 'starting' }).text, '$(loading~spin) CUDA-LLM');
        assert.equal(statusView([], { kind: 'stopped' }).text, '$(circle-slash) CUDA-LLM');
        const failed = statusView([], { kind: 'failed', message: 'cuda-llm-lsp is not installed for python3' });
        assert.ok(failed.error);
        assert.match(failed.tooltip, /not installed for python3/);
    });
});
