/**
 * `cudaLlm/suggestion` notifications -> what the diff view and the notification show.
 *
 * The server sends the kernel's original and suggested text with the figures; the client keeps the
 * latest suggestion per kernel and serves both texts as virtual documents under
 * `cuda-llm-suggestion:` so VS Code's diff editor can show them side by side. The server stays the
 * one that edits the file (`cudaLlm.accept`).
 */

import { KernelRef, kernelKey } from './commands';
import { MESSAGE_PREFIX, prefixed } from './messages';

export const SUGGESTION_NOTIFICATION = 'cudaLlm/suggestion';
export const SUGGESTION_SCHEME = 'cuda-llm-suggestion';

export interface Position {
    readonly line: number;
    readonly character: number;
}

export interface Suggestion extends KernelRef {
    /** Where the kernel is now; null when the server no longer finds the original text there. */
    readonly range: { readonly start: Position; readonly end: Position } | null;
    readonly original: string;
    readonly suggested: string;
    readonly speedup?: number;
    readonly baselineMs?: number;
    readonly bestMs?: number;
    readonly casesPassed?: number;
    readonly casesTotal?: number;
    readonly message?: string;
    /** What the figures are, when not measurements (`DEMO: recorded, not measured`). */
    readonly label?: string;
}

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** Checks the notification's params; a malformed one is reported, never thrown. */
export function parseSuggestion(raw: unknown): Parsed<Suggestion> {
    if (typeof raw !== 'object' || raw === null) {
        return { ok: false, error: 'cudaLlm/suggestion params must be an object' };
    }
    const p = raw as Record<string, unknown>;
    for (const key of ['uri', 'kernel', 'original', 'suggested'] as const) {
        if (typeof p[key] !== 'string') {
            return { ok: false, error: `cudaLlm/suggestion params: "${key}" must be a string` };
        }
    }
    if (p.uri === '' || p.kernel === '') {
        return { ok: false, error: 'cudaLlm/suggestion params: "uri" and "kernel" must not be empty' };
    }
    const range = p.range === null || p.range === undefined ? null : parseRange(p.range);
    if (range === undefined) {
        return { ok: false, error: 'cudaLlm/suggestion params: "range" must be null or {start: {line, character}, end: {...}}' };
    }
    return {
        ok: true,
        value: {
            uri: p.uri as string,
            kernel: p.kernel as string,
            range,
            original: p.original as string,
            suggested: p.suggested as string,
            speedup: finite(p.speedup),
            baselineMs: finite(p.baselineMs),
            bestMs: finite(p.bestMs),
            casesPassed: count(p.casesPassed),
            casesTotal: count(p.casesTotal),
            message: typeof p.message === 'string' && p.message.trim() !== '' ? p.message.trim() : undefined,
            ...(typeof p.label === 'string' && p.label.trim() !== '' ? { label: p.label.trim() } : {}),
        },
    };
}

function finite(v: unknown): number | undefined {
    return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function count(v: unknown): number | undefined {
    return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}

function parsePosition(v: unknown): Position | undefined {
    if (typeof v !== 'object' || v === null) {
        return undefined;
    }
    const { line, character } = v as Record<string, unknown>;
    return count(line) !== undefined && count(character) !== undefined
        ? { line: line as number, character: character as number }
        : undefined;
}

function parseRange(v: unknown): Suggestion['range'] | undefined {
    if (typeof v !== 'object' || v === null) {
        return undefined;
    }
    const start = parsePosition((v as Record<string, unknown>).start);
    const end = parsePosition((v as Record<string, unknown>).end);
    return start && end ? { start, end } : undefined;
}

/** `2.10×`; two decimals below 100×. */
export function formatSpeedup(speedup: number): string {
    return speedup >= 100 ? `${Math.round(speedup)}×` : `${speedup.toFixed(2)}×`;
}

/** `0.420 ms`, `12.5 µs`, `1.25 s`: three significant figures in a readable unit. */
export function formatMs(ms: number): string {
    if (ms < 1) {
        return `${precise(ms * 1000)} µs`;
    }
    if (ms >= 1000) {
        return `${precise(ms / 1000)} s`;
    }
    return `${precise(ms)} ms`;
}

function precise(x: number): string {
    return x >= 100 ? x.toFixed(0) : x.toPrecision(3);
}

/** `2.10× faster, 4/4 cases` (the parts that are known). */
export function figures(s: Suggestion): string {
    const parts: string[] = [];
    if (s.speedup !== undefined) {
        parts.push(s.speedup >= 1 ? `${formatSpeedup(s.speedup)} faster` : `${formatSpeedup(s.speedup)} (slower)`);
    }
    if (s.casesTotal !== undefined) {
        parts.push(`${s.casesPassed ?? 0}/${s.casesTotal} cases`);
    }
    return parts.join(', ');
}

/** `1.00 ms → 500 µs` when both timings are known. */
export function timings(s: Suggestion): string | undefined {
    return s.baselineMs !== undefined && s.bestMs !== undefined ? `${formatMs(s.baselineMs)} → ${formatMs(s.bestMs)}` : undefined;
}

/** The diff editor's title, e.g. `saxpy: original ↔ suggested (2.10× faster, 4/4 cases)`. */
export function diffTitle(s: Suggestion): string {
    const f = figures(s);
    const label = s.label === undefined ? '' : `[${s.label}] `; // first: a tab cuts the end off
    return `${label}${s.kernel}: original ↔ suggested${f === '' ? '' : ` (${f})`}`;
}

/**
 * What the server's message adds to the figures: its `2.10x faster (0.4200 ms -> 0.2000 ms),
 * 4/4 cases, ` head says again what the notification already shows, so only the rest is kept
 * (`re-validated on new inputs (round 1 candidate 2)`).
 */
export function serverNote(message: string | undefined): string | undefined {
    if (message === undefined) {
        return undefined;
    }
    const rest = message.replace(/^\s*\d+(?:\.\d+)?\s*[x×] faster(?:\s*\([^)]*\))?(?:,\s*\d+\/\d+ cases)?\s*[,;:]?\s*/i, '').trim();
    return rest === '' ? undefined : rest;
}

/**
 * The notification for a new suggestion: the figures once, in one format, short enough for one
 * line (a notification without buttons shows only its first line); e.g.
 * `cuda-llm: saxpy 2.10× faster (420 µs → 200 µs), 4/4 cases`. The diff it comes with has the
 * Accept (✓) and Reject (✗) buttons; the output channel has the server's full note.
 */
export function notificationText(s: Suggestion): string {
    const parts: string[] = [];
    if (s.speedup !== undefined) {
        const t = timings(s);
        parts.push(`${s.speedup >= 1 ? `${formatSpeedup(s.speedup)} faster` : `${formatSpeedup(s.speedup)} (slower)`}${t ? ` (${t})` : ''}`);
    }
    if (s.casesTotal !== undefined) {
        parts.push(`${s.casesPassed ?? 0}/${s.casesTotal} cases`);
    }
    if (s.label !== undefined) {
        // first, where a one-line toast cannot cut it off: a demo's figures are not measurements
        const text = parts.length === 0 ? `a suggested ${s.kernel}` : `${s.kernel} ${parts.join(', ')}`;
        return `cuda-llm [${s.label}]: ${text}`;
    }
    return prefixed(parts.length === 0 ? `a suggested ${s.kernel}` : `${s.kernel} ${parts.join(', ')}`);
}

/** The line the output channel gets for a new suggestion: the figures and the server's note. */
export function suggestionLogLine(s: Suggestion): string {
    const note = serverNote(s.message);
    return `Suggestion for ${s.kernel} in ${s.uri}: ${notificationText(s).slice(MESSAGE_PREFIX.length)}${note ? `; ${note}` : ''}`;
}

/** The title of the client command that shows a pending suggestion's diff again (package.json). */
export const SHOW_DIFF_COMMAND_TITLE = 'CUDA-LLM: Show Suggestion Diff';

/**
 * Why Accept cannot apply `s` to a document whose text is `current` (its kernel is no longer the
 * text the run started from), or undefined when it can. The server checks again before it edits.
 */
export function staleReason(s: Suggestion, current: string | undefined): string | undefined {
    if (current === undefined || current.includes(s.original)) {
        return undefined;
    }
    return refusalText(`${s.kernel} changed since the optimization started, so the suggestion was not applied (it would not fit the new text)`);
}

/**
 * The message for a refused Accept, from its reason (ours, or the server's answer to a confirmed
 * Accept, which it leaves to us to show): a changed kernel gets what to do next.
 */
export function refusalText(reason: string): string {
    const sentence = reason.trim().replace(/[.\s]+$/, '');
    return /changed since/.test(sentence)
        ? `${sentence}. See it again with "${SHOW_DIFF_COMMAND_TITLE}", or optimize again.`
        : `${sentence}.`;
}

export type Side = 'original' | 'suggested';

/**
 * The virtual document URI of one side, e.g. `cuda-llm-suggestion:/7/saxpy.suggested.cu`.
 * The number is the suggestion's id in the store (a new suggestion gets a new document, so VS Code
 * never shows a stale cached one); the `.cu` suffix gives the CUDA highlighting.
 */
export function suggestionDocUri(id: number, kernel: string, side: Side): string {
    const name = kernel.replace(/[^A-Za-z0-9_.-]+/g, '_') || 'kernel';
    return `${SUGGESTION_SCHEME}:/${id}/${name}.${side}.cu`;
}

/** The id and side in a virtual document's path (`/7/saxpy.suggested.cu`). */
export function parseSuggestionDocPath(path: string): { id: number; side: Side } | undefined {
    const m = /^\/(\d+)\/[^/]*\.(original|suggested)\.cu$/.exec(path);
    return m ? { id: Number(m[1]), side: m[2] as Side } : undefined;
}

export interface StoredSuggestion {
    readonly id: number;
    readonly suggestion: Suggestion;
}

/** The latest suggestion per kernel; ids only grow, so document URIs are never reused. */
export class SuggestionStore {
    private nextId = 1;
    private readonly byKernel = new Map<string, StoredSuggestion>();

    put(suggestion: Suggestion): StoredSuggestion {
        const stored = { id: this.nextId++, suggestion };
        this.byKernel.set(kernelKey(suggestion), stored);
        return stored;
    }

    get(ref: KernelRef): StoredSuggestion | undefined {
        return this.byKernel.get(kernelKey(ref));
    }

    byId(id: number): StoredSuggestion | undefined {
        for (const s of this.byKernel.values()) {
            if (s.id === id) {
                return s;
            }
        }
        return undefined;
    }

    /** The text of one side of a virtual document, if that suggestion is still pending. */
    content(path: string): string | undefined {
        const parsed = parseSuggestionDocPath(path);
        const stored = parsed && this.byId(parsed.id);
        return stored && parsed ? stored.suggestion[parsed.side] : undefined;
    }

    remove(ref: KernelRef): StoredSuggestion | undefined {
        const stored = this.get(ref);
        this.byKernel.delete(kernelKey(ref));
        return stored;
    }

    /** Pending suggestions, newest first; for one document when `uri` is given. */
    pending(uri?: string): StoredSuggestion[] {
        return [...this.byKernel.values()]
            .filter((s) => uri === undefined || s.suggestion.uri === uri)
            .sort((a, b) => b.id - a.id);
    }

    clear(): void {
        this.byKernel.clear();
    }
}
