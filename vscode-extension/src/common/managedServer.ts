/**
 * The server the extension installs itself: the `.vsix` ships the project's own wheel
 * (`server/cuda_llm_lsp-*.whl`), and **CUDA-LLM: Install/Update Server** puts it, with its
 * dependencies from the user's package index, into a private venv in the extension's global
 * storage. That works where `pip install` into the system Python is refused (PEP 668, Debian's
 * `python3`) and needs nothing from PyPI under this project's name.
 *
 * Which interpreter runs the server (first that applies): `cudaLlm.server.command`, an explicit
 * `cudaLlm.server.python`, the managed venv when it exists, else `python3` on PATH. The two
 * `server.*` settings are read from user (or remote machine) settings only: a cloned repository's
 * `.vscode/settings.json` must not choose the executable that runs (they have machine scope, and
 * `machineValue` ignores any workspace value VS Code would still report).
 */

import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { ConfigReader } from './settings';

export const VENV_DIR = 'server-venv';
/** The working directory of every process the extension starts: empty, and its own. */
export const NEUTRAL_DIR = 'process-cwd';
export const WHEEL_DIR = 'server';
/** Written into the venv after a successful install: the wheel's file name. */
export const INSTALLED_MARKER = 'cuda-llm-installed-wheel';
export const INSTALL_COMMAND_TITLE = 'CUDA-LLM: Install/Update Server';
export const INSTALL_BUTTON = 'Install Server';
export const UPDATE_BUTTON = 'Update Server';
export const BOOTSTRAP_PYTHON = 'python3';

/** What `WorkspaceConfiguration.inspect` gives (the parts read here). */
export interface Inspected<T> {
    readonly defaultValue?: T;
    readonly globalValue?: T;
    readonly workspaceValue?: T;
    readonly workspaceFolderValue?: T;
}

export interface InspectingReader extends ConfigReader {
    inspect?<T>(key: string): Inspected<T> | undefined;
}

/**
 * The value of a setting from user (or remote machine) settings, else its default: never a
 * workspace's. Falls back to `get` only for a reader that cannot inspect (tests, old hosts).
 */
export function machineValue<T>(config: InspectingReader, key: string): T | undefined {
    if (typeof config.inspect !== 'function') {
        return config.get<T>(key);
    }
    const seen = config.inspect<T>(key);
    return seen?.globalValue ?? seen?.defaultValue;
}

/** A reader that answers `server.python` / `server.command` with `machineValue`, other keys as they are. */
export function launchReader(config: InspectingReader, machineKeys: readonly string[]): ConfigReader {
    return { get: <T>(key: string) => (machineKeys.includes(key) ? machineValue<T>(config, key) : config.get<T>(key)) };
}

/** Where the venv and its interpreter are. */
export function venvPaths(globalStorage: string, platform: NodeJS.Platform = process.platform): { dir: string; python: string } {
    const dir = path.join(globalStorage, VENV_DIR);
    const python = platform === 'win32' ? path.join(dir, 'Scripts', 'python.exe') : path.join(dir, 'bin', 'python');
    return { dir, python };
}

/**
 * The directory every Python the extension starts runs in (created if missing): Python puts the
 * current directory first on `sys.path`, so a workspace folder there would let a repository's
 * `argparse.py` run in the server. Empty and in the extension's global storage, so nothing in it
 * is importable. Throws when it cannot be made (then nothing is started).
 */
export function neutralDir(globalStorage: string, mkdir: (p: string) => void = (p) => fs.mkdirSync(p, { recursive: true, mode: 0o700 })): string {
    const dir = path.join(globalStorage, NEUTRAL_DIR);
    mkdir(dir);
    return dir;
}

/** The wheel shipped in the `.vsix` (the newest by name when there are several), or undefined. */
export function shippedWheel(extensionPath: string, list: (dir: string) => string[] = safeList): string | undefined {
    const dir = path.join(extensionPath, WHEEL_DIR);
    const wheels = list(dir)
        .filter((name) => /^cuda_llm_lsp-[^-]+-.*\.whl$/.test(name))
        .sort();
    return wheels.length === 0 ? undefined : path.join(dir, wheels[wheels.length - 1]);
}

function safeList(dir: string): string[] {
    try {
        return fs.readdirSync(dir);
    } catch {
        return [];
    }
}

/** The managed interpreter when the venv has a completed install. */
export function managedPython(globalStorage: string, exists: (p: string) => boolean = fs.existsSync): string | undefined {
    const { dir, python } = venvPaths(globalStorage);
    return exists(python) && exists(path.join(dir, INSTALLED_MARKER)) ? python : undefined;
}

/** The wheel the venv was installed from (its file name), if any. */
export function installedWheel(globalStorage: string, read: (p: string) => string | undefined = safeRead): string | undefined {
    return read(path.join(venvPaths(globalStorage).dir, INSTALLED_MARKER))?.trim() || undefined;
}

function safeRead(p: string): string | undefined {
    try {
        return fs.readFileSync(p, 'utf8');
    } catch {
        return undefined;
    }
}

/**
 * Whether the user chose the interpreter or command (so the managed venv is not used): a
 * non-empty `server.command`, or a non-blank `server.python`, from user/machine settings.
 */
export function userChoseServer(config: ConfigReader): boolean {
    const command = config.get<unknown>('server.command');
    if (Array.isArray(command) ? command.length > 0 : command !== undefined && command !== null) {
        return true;
    }
    const python = config.get<unknown>('server.python');
    return python !== undefined && python !== null && !(typeof python === 'string' && python.trim() === '');
}

// ---- the install ------------------------------------------------------------------------

export interface Step {
    /** Shown in the progress notification. */
    readonly title: string;
    readonly command: string;
    readonly args: readonly string[];
    /** The working directory: the neutral one (`neutralDir`), never a workspace folder. */
    readonly cwd: string;
    /** Added to the extension host's environment. */
    readonly env: Readonly<Record<string, string>>;
}

/** Every install step's variables: pip never prompts; no directory of a script or cwd on `sys.path`. */
export const STEP_ENV: Readonly<Record<string, string>> = { PIP_NO_INPUT: '1', PYTHONSAFEPATH: '1' };

/** The fixed bootstrap check: Python 3.10+ with `venv` and `ensurepip` (Debian: `python3-venv`). */
export const PYTHON_CHECK =
    'import sys\n' +
    'if sys.version_info < (3, 10): sys.exit(3)\n' +
    'import venv, ensurepip\n';

/**
 * The commands, in order. The venv is created only when missing (an update keeps the downloaded
 * dependencies); `--force-reinstall --no-deps` replaces the package even when the new wheel has
 * the same version number.
 */
export function installSteps(bootstrap: string, venv: { dir: string; python: string }, wheel: string, venvExists: boolean, cwd: string): Step[] {
    const steps: Omit<Step, 'cwd' | 'env'>[] = [];
    if (!venvExists) {
        steps.push({ title: 'checking Python', command: bootstrap, args: ['-c', PYTHON_CHECK] });
        steps.push({ title: 'creating the environment', command: bootstrap, args: ['-m', 'venv', venv.dir] });
    }
    steps.push(
        {
            title: 'installing the server and its dependencies (first time: a few minutes)',
            command: venv.python,
            args: ['-m', 'pip', 'install', '--disable-pip-version-check', '--upgrade', wheel],
        },
        {
            title: 'installing this version of the server',
            command: venv.python,
            args: ['-m', 'pip', 'install', '--disable-pip-version-check', '--force-reinstall', '--no-deps', wheel],
        },
        { title: 'checking the install', command: venv.python, args: ['-c', 'import cuda_llm_lsp'] },
    );
    return steps.map((step) => ({ ...step, cwd, env: STEP_ENV }));
}

export interface StepResult {
    readonly code: number | null;
    /** Node's error code when the program could not start (ENOENT, EACCES). */
    readonly errorCode?: string;
    /** The last lines of its output, for the message. */
    readonly tail: string;
    readonly cancelled?: boolean;
}

export type StepRunner = (step: Step, onLine: (line: string) => void, signal: AbortSignal) => Promise<StepResult>;

/** Runs one step, its output line by line to `onLine`; never rejects. */
export const runStep: StepRunner = (step, onLine, signal) =>
    new Promise((resolve) => {
        const lines: string[] = [];
        let settled = false;
        const finish = (r: StepResult): void => {
            if (!settled) {
                settled = true;
                resolve(r);
            }
        };
        const child = spawn(step.command, [...step.args], {
            cwd: step.cwd,
            stdio: ['ignore', 'pipe', 'pipe'],
            windowsHide: true,
            env: { ...process.env, ...step.env },
        });
        const onAbort = (): void => {
            child.kill();
        };
        signal.addEventListener('abort', onAbort, { once: true });
        let partial = '';
        const take = (chunk: Buffer): void => {
            const text = partial + chunk.toString();
            const parts = text.split(/\r?\n/);
            partial = parts.pop() ?? '';
            for (const line of parts) {
                onLine(line);
                lines.push(line);
                if (lines.length > 20) {
                    lines.shift();
                }
            }
        };
        child.stdout?.on('data', take);
        child.stderr?.on('data', take);
        child.on('error', (err: NodeJS.ErrnoException) => finish({ code: null, errorCode: err.code ?? 'ERROR', tail: err.message }));
        child.on('close', (code) => {
            signal.removeEventListener('abort', onAbort);
            if (partial !== '') {
                onLine(partial);
                lines.push(partial);
            }
            finish({ code, tail: lines.join('\n'), cancelled: signal.aborted });
        });
    });

export type InstallOutcome = { readonly ok: true; readonly python: string } | { readonly ok: false; readonly message: string; readonly cancelled?: boolean };

/** The message for a step that failed: what is missing and how to get it. */
export function failureMessage(step: Step, index: number, result: StepResult, bootstrap: string): string {
    if (result.errorCode === 'ENOENT' || result.errorCode === 'EACCES') {
        return step.command === bootstrap
            ? `\`${bootstrap}\` was not found: install Python 3.10 or newer (Debian/Ubuntu: \`sudo apt install python3 python3-venv\`), or set cudaLlm.server.python to an interpreter where cuda-llm-lsp is installed.`
            : `the environment's Python \`${step.command}\` cannot be started (${result.errorCode}): run ${INSTALL_COMMAND_TITLE} again.`;
    }
    if (step.title === 'checking Python') {
        if (result.code === 3) {
            return `\`${bootstrap}\` is older than Python 3.10: install a newer Python, or set cudaLlm.server.python to an interpreter where cuda-llm-lsp is installed.`;
        }
        return `\`${bootstrap}\` cannot create virtual environments (no \`venv\`/\`ensurepip\`): install them (Debian/Ubuntu: \`sudo apt install python3-venv\`), then run ${INSTALL_COMMAND_TITLE} again.`;
    }
    if (step.title === 'creating the environment') {
        const hint = /ensurepip|python3(\.\d+)?-venv/.test(result.tail) ? ' (Debian/Ubuntu: `sudo apt install python3-venv`)' : '';
        return `\`${bootstrap} -m venv\` failed${hint}: see the output, then run ${INSTALL_COMMAND_TITLE} again.`;
    }
    const last = result.tail.split('\n').filter((l) => l.trim() !== '').pop() ?? '';
    return `installing the server failed at step ${index + 1} (${step.title}): ${last.trim() || `exit code ${result.code}`}. See the output; a proxy or private index is taken from pip's own configuration (pip.conf, PIP_INDEX_URL).`;
}

export interface InstallIo {
    readonly run: StepRunner;
    readonly exists: (p: string) => boolean;
    readonly remove: (p: string) => void;
    /** Makes a directory and its parents (the neutral working directory). */
    readonly mkdir: (p: string) => void;
    readonly write: (p: string, text: string) => void;
    readonly log: (line: string) => void;
    readonly report: (message: string) => void;
}

export const realIo = (log: (line: string) => void, report: (message: string) => void): InstallIo => ({
    run: runStep,
    exists: fs.existsSync,
    remove: (p) => fs.rmSync(p, { recursive: true, force: true }),
    mkdir: (p) => fs.mkdirSync(p, { recursive: true, mode: 0o700 }),
    write: (p, text) => fs.writeFileSync(p, text),
    log,
    report,
});

/**
 * Creates (if needed) the venv in `globalStorage` and installs `wheel` into it. A venv left
 * without a completed install (a failed or cancelled first run) is removed, so the next try
 * starts clean; an existing good venv is kept when an update fails.
 */
export async function installServer(
    globalStorage: string,
    wheel: string | undefined,
    io: InstallIo,
    signal: AbortSignal,
    bootstrap: string = BOOTSTRAP_PYTHON,
): Promise<InstallOutcome> {
    if (wheel === undefined) {
        return { ok: false, message: 'this build of the extension ships no server wheel (server/cuda_llm_lsp-*.whl): rebuild it with `npm run package`, or install cuda-llm-lsp yourself and set cudaLlm.server.python.' };
    }
    const venv = venvPaths(globalStorage);
    const marker = path.join(venv.dir, INSTALLED_MARKER);
    const hadInstall = io.exists(venv.python) && io.exists(marker);
    if (!hadInstall && io.exists(venv.dir)) {
        io.remove(venv.dir); // a half-made venv (no pip on Debian, or cancelled): start again
    }
    const steps = installSteps(bootstrap, venv, wheel, hadInstall, neutralDir(globalStorage, io.mkdir));
    for (const [i, step] of steps.entries()) {
        io.report(`${step.title} (${i + 1}/${steps.length})`);
        io.log(`$ ${[step.command, ...step.args].map((a) => (a.includes('\n') ? JSON.stringify(a) : a)).join(' ')}`);
        const result = await io.run(step, io.log, signal);
        if (result.cancelled || signal.aborted) {
            if (!hadInstall) {
                io.remove(venv.dir);
            }
            return { ok: false, cancelled: true, message: 'the server install was cancelled' };
        }
        if (result.code !== 0) {
            if (!hadInstall) {
                io.remove(venv.dir);
            }
            return { ok: false, message: failureMessage(step, i, result, bootstrap) };
        }
    }
    io.write(marker, `${path.basename(wheel)}\n`);
    return { ok: true, python: venv.python };
}

/** The "not usable" message offering the install command (instead of a `pip install` line). */
export function offerInstallMessage(problem: string, managed: boolean): string {
    return managed
        ? `${problem} Run ${INSTALL_COMMAND_TITLE} to repair the extension's own server environment.`
        : `${problem} Run ${INSTALL_COMMAND_TITLE} to install it into a private environment of the extension (or set cudaLlm.server.python to an interpreter where cuda-llm-lsp is installed).`;
}
