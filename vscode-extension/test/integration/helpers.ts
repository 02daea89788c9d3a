/**
 * What the integration tests share: loading the bundle against the fake `vscode`, the manifest's
 * default settings, polling for a condition, finding the repository's Python, and checking that
 * no server process outlives the extension.
 */

import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import Module from 'node:module';
import * as path from 'node:path';
import { fake } from './fakeVscode';

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

/** A suggestion's notification as the user saw it, with the diff shown beside it. */
export interface Offer {
    text: string;
    items: string[];
    original?: string;
    suggested?: string;
    title?: unknown;
}

/**
 * Answers the notification whose text contains `match` with `answer`; the returned function
 * gives what it offered, the diff read before the answer closes it (undefined until then).
 */
export function answerOffer(match: string, answer: string): () => Offer | undefined {
    let offered: Offer | undefined;
    fake.answer = (text, items) => {
        if (!text.includes(match)) {
            return undefined;
        }
        const diff = fake.executed.find((e) => e.id === 'vscode.diff');
        const provider = fake.contentProviders.get('cuda-llm-suggestion');
        offered = {
            text,
            items,
            original: diff && provider?.provideTextDocumentContent(diff.args[0] as any),
            suggested: diff && provider?.provideTextDocumentContent(diff.args[1] as any),
            title: diff?.args[2],
        };
        return answer;
    };
    return () => offered;
}
