/**
 * What the integration tests share: loading the bundle against the fake `vscode`, the manifest's
 * default settings, polling for a condition, finding the repository's Python, and checking that
 * no server process outlives the extension.
 */

import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import Module from 'node:module';
import * as path from 'node:path';
import { RecordedProgress, fake } from './fakeVscode';

export const ROOT = path.resolve(__dirname, '../../..');
export const REPO = path.resolve(ROOT, '..');
const BUNDLE = path.join(ROOT, 'dist', 'extension.js');
const MANIFEST = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

export interface ExtensionModule {
    activate(context: unknown): Promise<void>;
    deactivate(): Promise<void>;
}

/** dist/extension.js, freshly required, with `import 'vscode'` answered by the fake. */
export function loadBundle(): ExtensionModule {
    const M = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
    const original = M._resolveFilename;
    M._resolveFilename = function (request: string, ...rest: unknown[]) {
        return request === 'vscode' ? require.resolve('./fakeVscode') : original.call(this, request, ...rest);
    };
    delete require.cache[BUNDLE];
    return require(BUNDLE) as ExtensionModule;
}

/** Every `cudaLlm.*` setting back to the manifest's default. */
export function resetSettings(): void {
    fake.settings.clear();
    for (const [key, spec] of Object.entries<any>(MANIFEST.contributes.configuration.properties)) {
        fake.settings.set(key, spec.default);
    }
}

/** Polls `probe` until it gives a value; on timeout, fails with the extension's output. */
export async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const value = probe();
        if (value) {
            return value;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out waiting for ${what}\n--- output ---\n${fake.output.slice(-4000)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
    }
}

/**
 * The interpreter from CUDA_LLM_PYTHON, else the repository's `.venv`, that runs `probe` (Python
 * imports) with the checkout on PYTHONPATH, which is then set for the servers it starts.
 */
export function findPython(probe: string, what: string): { python?: string; reason?: string } {
    const candidates = [process.env.CUDA_LLM_PYTHON, path.join(REPO, '.venv', 'bin', 'python')].filter(
        (p): p is string => p !== undefined && p !== '',
    );
    // A checkout not pip-installed into its venv: the package is found through PYTHONPATH.
    const env = { ...process.env, PYTHONPATH: [REPO, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) };
    for (const python of candidates) {
        if (fs.existsSync(python) && spawnSync(python, ['-c', probe], { timeout: 60_000, env, cwd: REPO }).status === 0) {
            process.env.PYTHONPATH = env.PYTHONPATH;
            return { python };
        }
    }
    return { reason: `no Python with ${what} (set CUDA_LLM_PYTHON; tried ${candidates.join(', ') || 'nothing'})` };
}

/** Live (non-zombie) child processes of this test process: a server left running is a leak. */
export function liveChildren(): number[] {
    if (process.platform !== 'linux') {
        return [];
    }
    return fs
        .readdirSync('/proc')
        .filter((name) => /^\d+$/.test(name))
        .flatMap((name) => {
            try {
                const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
                const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
                return Number(fields[1]) === process.pid && fields[0] !== 'Z' ? [Number(name)] : [];
            } catch {
                return [];
            }
        });
}

/** A suggestion's notification as the user saw it, with the diff opened with it. */
export interface Offer {
    notice: RecordedProgress;
    /** The `vscode.diff` call: left and right URIs, title, options. */
    diff: { id: string; args: unknown[] };
    original?: string;
    suggested?: string;
}

/**
 * The notification whose title contains `match` (a progress notification, which lasts as long as
 * its suggestion: `notice.done` once it is decided) and the diff opened with it, the texts of its
 * two sides read now; undefined until both are there.
 */
export function offerOf(match: string): Offer | undefined {
    const notice = fake.progress.find((p) => p.title.includes(match));
    const diff = [...fake.executed].reverse().find((e) => e.id === 'vscode.diff');
    if (notice === undefined || diff === undefined) {
        return undefined;
    }
    const provider = fake.contentProviders.get('cuda-llm-suggestion');
    return {
        notice,
        diff,
        original: provider?.provideTextDocumentContent(diff.args[0] as any),
        suggested: provider?.provideTextDocumentContent(diff.args[1] as any),
    };
}
