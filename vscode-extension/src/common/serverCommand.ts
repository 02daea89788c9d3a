/**
 * How the language server is started, and whether it can be.
 *
 * Either `cudaLlm.server.command` (a full command line as an array) or
 * `<cudaLlm.server.python> -m cuda_llm_lsp`. Before the client starts, the Python interpreter is
 * asked to import the package, so a missing install gives one clear message with the fix instead
 * of a crashed server and a stack trace in the output channel.
 *
 * No workspace file is ever imported: Python puts its current directory first on `sys.path` for
 * `-m` and `-c`, so a repository's `argparse.py` or `cuda_llm_lsp.py` would run inside the server
 * (or the check) if it started in a workspace folder. Every Python the extension starts runs in
 * a directory of its own (`neutralDir`, in its global storage, empty) with `PYTHONSAFEPATH=1`
 * (Python 3.11+ then adds no directory at all; 3.10 relies on the directory). Not `-I`: that
 * also drops PYTHONPATH, which real installs use.
 */

import { spawn } from 'node:child_process';
import { offerInstallMessage } from './managedServer';
import { ConfigReader, PathVariables, expandVariables } from './settings';

export const DEFAULT_PYTHON = 'python3';
export const SERVER_MODULE = 'cuda_llm_lsp';
export const INSTALL_CHECK_TIMEOUT_MS = 30_000;
/** Python 3.11+: neither the current directory nor a script's directory goes on `sys.path`. */
export const SAFE_PATH_ENV: Readonly<Record<string, string>> = { PYTHONSAFEPATH: '1' };

export interface ServerLaunch {
    readonly command: string;
    readonly args: readonly string[];
    /** The interpreter when started as `python -m cuda_llm_lsp`; undefined for a full command. */
    readonly python?: string;
    /** Variables added to the server's environment (`CUDA_LLM_EVALUATOR` in demo/test mode). */
    readonly env?: Readonly<Record<string, string>>;
    /** True when the interpreter is the extension's own venv (CUDA-LLM: Install/Update Server). */
    readonly managed?: boolean;
}

/** The server's variable behind `cudaLlm.server.evaluator`. */
export const EVALUATOR_ENV = 'CUDA_LLM_EVALUATOR';

/**
 * `cudaLlm.server.evaluator`: empty for the local GPU, or `recorded:FILE` for demo/test mode
 * (recorded GPU outcomes, nothing measured); the server gets it as `CUDA_LLM_EVALUATOR`.
 */
export function resolveEvaluator(config: ConfigReader, vars: PathVariables = {}): Resolved<string | undefined> {
    const raw = config.get<unknown>('server.evaluator');
    if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) {
        return { ok: true, value: undefined };
    }
    const value = typeof raw === 'string' ? raw.trim() : '';
    if (value === 'gpu') {
        return { ok: true, value: undefined };
    }
    if (!value.startsWith('recorded:') || value === 'recorded:') {
        return { ok: false, message: 'cudaLlm.server.evaluator must be empty (the GPU) or "recorded:/path/to/recording.json" (demo/test mode)' };
    }
    return { ok: true, value: `recorded:${expandVariables(value.slice('recorded:'.length), vars)}` };
}

export type Resolved<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly message: string };

/**
 * The command line from settings (`server.command` wins over `server.python`), with
 * `server.evaluator`. `managed` is the interpreter of the extension's own venv, used when neither
 * is set; without it, `python3` on PATH.
 */
export function resolveServerLaunch(config: ConfigReader, vars: PathVariables = {}, managed?: string): Resolved<ServerLaunch> {
    const evaluator = resolveEvaluator(config, vars);
    if (!evaluator.ok) {
        return evaluator;
    }
    const launch = resolveCommand(config, vars, managed);
    if (!launch.ok || evaluator.value === undefined) {
        return launch;
    }
    return { ok: true, value: { ...launch.value, env: { [EVALUATOR_ENV]: evaluator.value } } };
}

function resolveCommand(config: ConfigReader, vars: PathVariables, managed?: string): Resolved<ServerLaunch> {
    const command = config.get<unknown>('server.command');
    if (command !== undefined && command !== null && !(Array.isArray(command) && command.length === 0)) {
        if (!Array.isArray(command) || !command.every((c) => typeof c === 'string') || String(command[0]).trim() === '') {
            return {
                ok: false,
                message:
                    'cudaLlm.server.command must be a list of strings, the program first, ' +
                    'e.g. ["/path/to/python", "-m", "cuda_llm_lsp"]',
            };
        }
        const [program, ...args] = (command as string[]).map((c) => expandVariables(c, vars));
        return { ok: true, value: { command: program.trim(), args } };
    }
    const raw = config.get<unknown>('server.python');
    if (raw !== undefined && raw !== null && typeof raw !== 'string') {
        return { ok: false, message: 'cudaLlm.server.python must be the path of a Python interpreter (a string)' };
    }
    const chosen = (raw ?? '').trim();
    if (chosen === '' && managed !== undefined) {
        return { ok: true, value: { command: managed, args: ['-m', SERVER_MODULE], python: managed, managed: true } };
    }
    const python = expandVariables(chosen || DEFAULT_PYTHON, vars);
    return { ok: true, value: { command: python, args: ['-m', SERVER_MODULE], python } };
}

export function notInstalledMessage(python: string, managed = false): string {
    return offerInstallMessage(`cuda-llm-lsp is not installed for ${python}.`, managed);
}

export function brokenInstallMessage(python: string, error: string, managed = false): string {
    return offerInstallMessage(`cuda-llm-lsp fails to import in ${python} (${error}); the output has the details.`, managed);
}

export function interpreterMissingMessage(python: string, managed = false): string {
    return offerInstallMessage(`Python interpreter \`${python}\` was not found.`, managed);
}

export function programMissingMessage(program: string): string {
    return `The language server command \`${program}\` was not found: check cudaLlm.server.command.`;
}

export interface RunResult {
    /** Exit code, or null when the process could not start or was killed. */
    readonly code: number | null;
    /** Node's error code when the process could not start (ENOENT, EACCES). */
    readonly errorCode?: string;
    readonly stderr: string;
    readonly timedOut: boolean;
}

export type ProcessRunner = (
    command: string,
    args: readonly string[],
    options: { timeoutMs: number; cwd?: string; env?: NodeJS.ProcessEnv },
) => Promise<RunResult>;

/** Runs a short command to completion; never rejects. */
export const runProcess: ProcessRunner = (command, args, options) =>
    new Promise((resolve) => {
        let stderr = '';
        let timedOut = false;
        let settled = false;
        const finish = (r: RunResult): void => {
            if (!settled) {
                settled = true;
                clearTimeout(timer);
                resolve(r);
            }
        };
        const child = spawn(command, [...args], {
            cwd: options.cwd,
            env: options.env,
            stdio: ['ignore', 'ignore', 'pipe'],
            windowsHide: true,
        });
        const timer = setTimeout(() => {
            timedOut = true;
            child.kill();
        }, options.timeoutMs);
        child.stderr?.on('data', (chunk: Buffer) => {
            if (stderr.length < 8192) {
                stderr += chunk.toString();
            }
        });
        child.on('error', (err: NodeJS.ErrnoException) =>
            finish({ code: null, errorCode: err.code ?? 'ERROR', stderr: err.message, timedOut }),
        );
        child.on('close', (code) => finish({ code, stderr, timedOut }));
    });

export interface CheckOutcome {
    readonly ok: boolean;
    /** What to show the user when not ok. */
    readonly message?: string;
    /** Details for the output channel (the interpreter's stderr). */
    readonly detail?: string;
}

/**
 * The environment of the server process: the extension host's, unbuffered, `PYTHONSAFEPATH` for
 * `python -m cuda_llm_lsp` (not for a user's full command, which may be a wrapper whose own
 * script directory matters), and the launch's variables.
 */
export function serverEnv(launch: ServerLaunch, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
    return { ...base, PYTHONUNBUFFERED: '1', ...(launch.python !== undefined ? SAFE_PATH_ENV : {}), ...launch.env };
}

/**
 * Asks the interpreter to import the server package, in `options.cwd` (the extension's neutral
 * directory: never a workspace folder) with `PYTHONSAFEPATH=1`. A full `server.command` is not
 * checked beyond existing: it may be a wrapper script that takes no `-c`.
 */
export async function checkServerInstalled(
    launch: ServerLaunch,
    run: ProcessRunner = runProcess,
    options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<CheckOutcome> {
    if (launch.python === undefined) {
        return { ok: true };
    }
    const result = await run(launch.python, ['-c', `import ${SERVER_MODULE}`], {
        timeoutMs: options.timeoutMs ?? INSTALL_CHECK_TIMEOUT_MS,
        cwd: options.cwd,
        env: { ...(options.env ?? process.env), ...SAFE_PATH_ENV },
    });
    if (result.errorCode === 'ENOENT' || result.errorCode === 'EACCES') {
        return { ok: false, message: interpreterMissingMessage(launch.python, launch.managed), detail: result.stderr };
    }
    if (result.timedOut) {
        // A slow first import (cold disk) is not a missing install: let the client try.
        return { ok: true, detail: `\`${launch.python} -c "import ${SERVER_MODULE}"\` took too long; starting anyway` };
    }
    if (result.code !== 0) {
        const detail = result.stderr.trim();
        const lastLine = detail.split(/\r?\n/).pop() ?? '';
        const missing = detail === '' || new RegExp(`No module named '?${SERVER_MODULE}`).test(detail);
        const message = missing ? notInstalledMessage(launch.python, launch.managed) : brokenInstallMessage(launch.python, lastLine, launch.managed);
        return { ok: false, message, detail };
    }
    return { ok: true };
}
