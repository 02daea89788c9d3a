/**
 * Command ids and argument builders.
 *
 * Server commands are registered in VS Code by vscode-languageclient from the server's
 * `executeCommandProvider`; client commands use a distinct `cudaLlm.client.` prefix so the two
 * never clash. Every server command takes one argument `{uri, kernel}`; `cudaLlm.cancel` without
 * an argument means "cancel every job".
 */

export const ServerCommand = {
    optimize: 'cudaLlm.optimize',
    benchmark: 'cudaLlm.benchmark',
    accept: 'cudaLlm.accept',
    reject: 'cudaLlm.reject',
    cancel: 'cudaLlm.cancel',
    showSuggestion: 'cudaLlm.showSuggestion',
    addSpec: 'cudaLlm.addSpec',
    profile: 'cudaLlm.profile',
    demoExample: 'cudaLlm.demoExample',
} as const;

export const ClientCommand = {
    restartServer: 'cudaLlm.client.restartServer',
    setApiKey: 'cudaLlm.client.setApiKey',
    clearApiKey: 'cudaLlm.client.clearApiKey',
    optimizeKernel: 'cudaLlm.client.optimizeKernel',
    benchmarkKernel: 'cudaLlm.client.benchmarkKernel',
    profileKernel: 'cudaLlm.client.profileKernel',
    acceptSuggestion: 'cudaLlm.client.acceptSuggestion',
    rejectSuggestion: 'cudaLlm.client.rejectSuggestion',
    showSuggestion: 'cudaLlm.client.showSuggestion',
    cancelAll: 'cudaLlm.client.cancelAll',
    showOutput: 'cudaLlm.client.showOutput',
    installServer: 'cudaLlm.client.installServer',
    tryDemo: 'cudaLlm.client.tryDemo',
} as const;

/**
 * Server commands that run code from the workspace (the kernel on the GPU, LLM candidates built
 * from it): refused in an untrusted workspace (Restricted Mode), wherever they are started from.
 */
export const TRUSTED_ONLY: readonly string[] = [
    ServerCommand.optimize,
    ServerCommand.benchmark,
    ServerCommand.profile,
];

const TRUSTED_ONLY_NAMES: Readonly<Record<string, string>> = {
    [ServerCommand.optimize]: 'Optimize',
    [ServerCommand.benchmark]: 'Benchmark',
    [ServerCommand.profile]: 'Profile',
};

/** The refusal for a trusted-only command in Restricted Mode, or undefined when it may run. */
export function untrustedRefusal(command: string, trusted: boolean): string | undefined {
    if (trusted || !TRUSTED_ONLY.includes(command)) {
        return undefined;
    }
    const what = TRUSTED_ONLY_NAMES[command] ?? 'This command';
    return `${what} runs this workspace's code on your GPU, so it is off in Restricted Mode: trust the workspace (Manage Workspace Trust) to use it.`;
}

export type ServerCommandId = (typeof ServerCommand)[keyof typeof ServerCommand];
export type ClientCommandId = (typeof ClientCommand)[keyof typeof ClientCommand];

/** The one argument every per-kernel server command takes. */
export interface KernelRef {
    readonly uri: string;
    readonly kernel: string;
}

export function isKernelRef(value: unknown): value is KernelRef {
    if (typeof value !== 'object' || value === null) {
        return false;
    }
    const v = value as Record<string, unknown>;
    return typeof v.uri === 'string' && v.uri !== '' && typeof v.kernel === 'string' && v.kernel !== '';
}

/** Arguments for `cudaLlm.optimize` / `benchmark` / `accept` / `reject` / `showSuggestion` / `addSpec`. */
export function kernelArgs(uri: string, kernel: string): [KernelRef] {
    if (uri === '' || kernel === '') {
        throw new Error('a kernel command needs both a document URI and a kernel name');
    }
    return [{ uri, kernel }];
}

/** Arguments for `cudaLlm.cancel` of every job: none at all. */
export function cancelAllArgs(): [] {
    return [];
}

/**
 * Arguments for `cudaLlm.accept` from this extension: the user has seen the diff and pressed
 * Accept, so `confirmed: true` asks the server to apply the edit in one step (no second
 * confirmation in VS Code's Refactor Preview). The server still refuses a changed kernel.
 */
export function acceptArgs(uri: string, kernel: string): [KernelRef & { confirmed: true }] {
    return [{ ...kernelArgs(uri, kernel)[0], confirmed: true }];
}

/** The server's reason for not applying (`{applied: false, reason}`), if it gave one. */
export function refusalReason(result: unknown): string | undefined {
    const reason = typeof result === 'object' && result !== null ? (result as { reason?: unknown }).reason : undefined;
    return typeof reason === 'string' && reason.trim() !== '' ? reason.trim() : undefined;
}

/** `false` or `{applied: false}` from `cudaLlm.accept`: the server did not apply the edit (stale kernel). */
export function acceptRefused(result: unknown): boolean {
    if (result === false) {
        return true;
    }
    return typeof result === 'object' && result !== null && (result as { applied?: unknown }).applied === false;
}

/** The job's progress token in the server's answer to `cudaLlm.optimize` / `benchmark` (`{token}`). */
export function jobToken(result: unknown): string | undefined {
    if (typeof result !== 'object' || result === null) {
        return undefined;
    }
    const token = (result as { token?: unknown }).token;
    return typeof token === 'string' && token !== '' ? token : undefined;
}

/**
 * Whether a finished optimization's end message says a suggestion is waiting ("2.10× faster,
 * 4/4 cases: suggestion ready"): then the client asks for it with `cudaLlm.showSuggestion` unless
 * the server already sent `cudaLlm/suggestion` (current servers do; older ones did not).
 */
export function endsWithSuggestion(message: string | undefined): boolean {
    return message !== undefined && /suggestion ready/i.test(message);
}

/** A stable key for maps of per-kernel state. */
export function kernelKey(ref: KernelRef): string {
    return `${ref.uri}#${ref.kernel}`;
}

/** A kernel in a document, as found from the server's code lenses or a text scan. */
export interface KernelLocation {
    readonly kernel: string;
    /** 0-based line of the kernel's declaration (or of its code lens). */
    readonly line: number;
}

/** Shape of a code lens as far as we read it (vscode.CodeLens satisfies it). */
export interface LensLike {
    readonly range: { readonly start: { readonly line: number } };
    readonly command?: { readonly command: string; readonly arguments?: readonly unknown[] };
}

/** Kernels named by the server's code lenses for `uri`, one per kernel, in line order. */
export function kernelsFromLenses(lenses: readonly LensLike[], uri: string): KernelLocation[] {
    const seen = new Map<string, number>();
    for (const lens of lenses) {
        const arg = lens.command?.arguments?.[0];
        if (!lens.command?.command.startsWith('cudaLlm.') || !isKernelRef(arg) || arg.uri !== uri) {
            continue;
        }
        const line = lens.range.start.line;
        const known = seen.get(arg.kernel);
        if (known === undefined || line < known) {
            seen.set(arg.kernel, line);
        }
    }
    return [...seen].map(([kernel, line]) => ({ kernel, line })).sort((a, b) => a.line - b.line);
}

const GLOBAL_KERNEL = /__global__\s(?:__launch_bounds__\s*\([^)]*\)|[^(;{}])*?\b(?!__launch_bounds__\b)([A-Za-z_]\w*)\s*\(/g;

/**
 * Kernels declared with `__global__`, for when the server offers no code lenses yet.
 * A textual scan, good enough to pick a name: the server checks the name for real.
 */
export function scanKernels(text: string): KernelLocation[] {
    const found: KernelLocation[] = [];
    const code = blankComments(text);
    for (const match of code.matchAll(GLOBAL_KERNEL)) {
        const name = match[1];
        const nameOffset = (match.index ?? 0) + match[0].lastIndexOf(name);
        const line = countLines(code, nameOffset);
        if (name !== 'void' && !found.some((k) => k.kernel === name)) {
            found.push({ kernel: name, line });
        }
    }
    return found;
}

/**
 * The kernel the cursor is in or just above: the last one declared at or before `line`,
 * else the first one below (a cursor in the spec comment above the first kernel).
 */
export function kernelAt(kernels: readonly KernelLocation[], line: number): KernelLocation | undefined {
    const sorted = [...kernels].sort((a, b) => a.line - b.line);
    let chosen: KernelLocation | undefined;
    for (const k of sorted) {
        if (k.line <= line) {
            chosen = k;
        }
    }
    return chosen ?? sorted[0];
}

function countLines(text: string, offset: number): number {
    let line = 0;
    for (let i = 0; i < offset; i++) {
        if (text.charCodeAt(i) === 10) {
            line++;
        }
    }
    return line;
}

/** Comments replaced by spaces (newlines kept), so that commented-out kernels are not found. */
function blankComments(text: string): string {
    return text.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, (c) => c.replace(/[^\n]/g, ' '));
}
