/**
 * Running jobs, as seen through the server's work-done progress, and the status-bar text.
 *
 * The server reports each optimization or benchmark as one work-done progress (begin, reports,
 * end). The tracker keeps the ones in flight with the best speedup mentioned so far (report
 * messages such as "round 2/4: best 1.83×"), which the status bar shows; clicking it cancels.
 */

import { formatSpeedup } from './suggestion';

export type ProgressToken = string | number;

export interface ProgressBegin {
    readonly kind: 'begin';
    readonly title: string;
    readonly cancellable?: boolean;
    readonly message?: string;
    readonly percentage?: number;
}

export interface ProgressReport {
    readonly kind: 'report';
    readonly cancellable?: boolean;
    readonly message?: string;
    readonly percentage?: number;
}

export interface ProgressEnd {
    readonly kind: 'end';
    readonly message?: string;
}

export type ProgressValue = ProgressBegin | ProgressReport | ProgressEnd;

export type JobKind = 'optimizing' | 'benchmarking' | 'running';

export interface Job {
    readonly token: ProgressToken;
    readonly title: string;
    readonly kind: JobKind;
    readonly cancellable: boolean;
    readonly message?: string;
    readonly percentage?: number;
    readonly best?: number;
}

export function jobKind(title: string): JobKind {
    if (/optimi[sz]/i.test(title)) {
        return 'optimizing';
    }
    if (/bench/i.test(title)) {
        return 'benchmarking';
    }
    return 'running';
}

/**
 * The best speedup a progress message mentions: `best 1.83×` (or `1.83x`) first, else the largest
 * `N×` in the message. Undefined when it names none.
 */
export function parseSpeedup(message: string | undefined): number | undefined {
    if (message === undefined) {
        return undefined;
    }
    const best = /\bbest\b[^0-9×]{0,20}?(\d+(?:\.\d+)?)\s*[×x]/i.exec(message);
    if (best) {
        return Number(best[1]);
    }
    const all = [...message.matchAll(/(\d+(?:\.\d+)?)\s*×/g)].map((m) => Number(m[1]));
    return all.length > 0 ? Math.max(...all) : undefined;
}

/** Jobs in flight, keyed by progress token; fed from `$/progress` values. */
export class JobTracker {
    private readonly jobs = new Map<ProgressToken, Job>();

    /** Applies one progress value; returns true when what the status bar shows may have changed. */
    update(token: ProgressToken, value: ProgressValue): boolean {
        const job = this.jobs.get(token);
        switch (value.kind) {
            case 'begin':
                this.jobs.set(token, {
                    token,
                    title: value.title,
                    kind: jobKind(value.title),
                    cancellable: value.cancellable ?? false,
                    message: value.message,
                    percentage: value.percentage,
                    best: parseSpeedup(value.message),
                });
                return true;
            case 'report': {
                if (job === undefined) {
                    return false;
                }
                const found = parseSpeedup(value.message);
                this.jobs.set(token, {
                    ...job,
                    cancellable: value.cancellable ?? job.cancellable,
                    message: value.message ?? job.message,
                    percentage: value.percentage ?? job.percentage,
                    best: found === undefined ? job.best : Math.max(found, job.best ?? 0),
                });
                return true;
            }
            case 'end':
                return this.jobs.delete(token);
            default:
                return false;
        }
    }

    /** A suggestion arrived for a job still in flight (its speedup counts as found). */
    noteSpeedup(speedup: number): void {
        for (const [token, job] of this.jobs) {
            if (job.kind === 'optimizing') {
                this.jobs.set(token, { ...job, best: Math.max(speedup, job.best ?? 0) });
            }
        }
    }

    all(): Job[] {
        return [...this.jobs.values()];
    }

    cancellableTokens(): ProgressToken[] {
        return this.all()
            .filter((j) => j.cancellable)
            .map((j) => j.token);
    }

    clear(): void {
        this.jobs.clear();
    }
}

export type ServerState =
    | { readonly kind: 'starting' }
    | { readonly kind: 'running' }
    | { readonly kind: 'stopped' }
    | { readonly kind: 'failed'; readonly message: string };

export interface StatusView {
    readonly text: string;
    readonly tooltip: string;
    /** Which client command a click runs: cancel while jobs run, else the output channel. */
    readonly action: 'cancel' | 'showOutput';
    readonly busy: boolean;
    readonly error: boolean;
}

export function bestSpeedup(jobs: readonly Job[]): number | undefined {
    const found = jobs.map((j) => j.best).filter((b): b is number => b !== undefined);
    return found.length > 0 ? Math.max(...found) : undefined;
}

/** Status-bar text: `$(sync~spin) CUDA-LLM: 2 optimizing · best 1.80×` while busy, else the state. */
export function statusView(jobs: readonly Job[], server: ServerState): StatusView {
    if (jobs.length > 0) {
        const counts = (['optimizing', 'benchmarking', 'running'] as const)
            .map((kind) => [kind, jobs.filter((j) => j.kind === kind).length] as const)
            .filter(([, n]) => n > 0)
            .map(([kind, n]) => `${n} ${kind}`);
        const best = bestSpeedup(jobs);
        const text = `$(sync~spin) CUDA-LLM: ${counts.join(', ')}${best === undefined ? '' : ` · best ${formatSpeedup(best)}`}`;
        const lines = jobs.map((j) => `• ${j.title}${j.message ? ` — ${j.message}` : ''}`);
        return {
            text,
            tooltip: [...lines, '', 'Click to cancel all'].join('\n'),
            action: 'cancel',
            busy: true,
            error: false,
        };
    }
    switch (server.kind) {
        case 'starting':
            return {
                text: '$(loading~spin) CUDA-LLM',
                tooltip: 'CUDA-LLM: starting the language server',
                action: 'showOutput',
                busy: false,
                error: false,
            };
        case 'failed':
            return {
                text: '$(error) CUDA-LLM',
                tooltip: `CUDA-LLM: ${server.message}\nClick to show the log`,
                action: 'showOutput',
                busy: false,
                error: true,
            };
        case 'stopped':
            return {
                text: '$(circle-slash) CUDA-LLM',
                tooltip: 'CUDA-LLM: the language server is stopped (run "CUDA-LLM: Restart Server")',
                action: 'showOutput',
                busy: false,
                error: false,
            };
        default:
            return {
                text: '$(zap) CUDA-LLM',
                tooltip: 'CUDA-LLM: idle; use "Optimize" above a kernel\nClick to show the log',
                action: 'showOutput',
                busy: false,
                error: false,
            };
    }
}
