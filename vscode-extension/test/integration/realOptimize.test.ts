/**
 * An optimization through the bundled extension and the real Python server, end to end: the
 * server's FSR loop, NVRTC and the openai SDK are real; the LLM is the repository's scripted
 * OpenAI-compatible server on 127.0.0.1 and the GPU is replaced by recorded outcomes
 * (`tests/lsp/servers/recorded_server.py`). Checks the contract of the suggestion: the server
 * sends `cudaLlm/suggestion` by itself when the job ends (the extension declares
 * `experimental.cudaLlm.suggestionNotification`), so the diff opens without the extension asking
 * with `cudaLlm.showSuggestion`, and the server neither writes nor opens its read-only preview.
 * Skipped, with the reason, where the repository's Python is not there.
 */

import assert from 'node:assert/strict';
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import Module from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { fake, makeContext, makeDocument } from './fakeVscode';

const ROOT = path.resolve(__dirname, '../../..');
const REPO = path.resolve(ROOT, '..');
const BUNDLE = path.join(ROOT, 'dist', 'extension.js');
const MANIFEST = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const DATA = path.join(REPO, 'tests', 'lsp', 'data');
const SAXPY = path.join(DATA, 'saxpy.cu');
const FAST = `extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    // variant: fast
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}`;

function findPython(): { python?: string; reason?: string } {
    const candidates = [process.env.CUDA_LLM_PYTHON, path.join(REPO, '.venv', 'bin', 'python')].filter(
        (p): p is string => p !== undefined && p !== '',
    );
    const env = { ...process.env, PYTHONPATH: [REPO, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) };
    for (const python of candidates) {
        const probe = 'import cuda_llm_lsp.lsp.server, cuda_llm_lsp.evaluate.recorded, tests.support.scripted_llm';
        if (fs.existsSync(python) && spawnSync(python, ['-c', probe], { timeout: 60_000, env, cwd: REPO }).status === 0) {
            process.env.PYTHONPATH = env.PYTHONPATH;
            return { python };
        }
    }
    return { reason: `no Python with cuda_llm_lsp and its tests (set CUDA_LLM_PYTHON; tried ${candidates.join(', ') || 'nothing'})` };
}

const found = fs.existsSync(SAXPY) ? findPython() : { reason: 'tests/lsp/data/saxpy.cu is missing' };

/** Live (non-zombie) child processes of this test process: a server left running is a leak. */
function liveChildren(): number[] {
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

async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        const value = probe();
        if (value) {
            return value;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out waiting for ${what}\n--- output ---\n${fake.output.slice(-4000)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}

/** The scripted LLM in its own process; resolves with its base URL. */
function startLlm(python: string, scratch: string): Promise<{ process: ChildProcess; baseUrl: string }> {
    const script = path.join(scratch, 'llm.json');
    const reply = `Here is a faster version.\n\n\`\`\`cuda\n${FAST}\n\`\`\`\n`;
    fs.writeFileSync(script, JSON.stringify([{ text: reply, repeat: -1 }]));
    const child = spawn(python, ['-m', 'tests.support.scripted_llm', '--script', script], { cwd: REPO, env: process.env });
    return new Promise((resolve, reject) => {
        let seen = '';
        child.stdout!.on('data', (chunk: Buffer) => {
            seen += chunk.toString();
            const match = /listening on (\S+)/.exec(seen);
            if (match) {
                resolve({ process: child, baseUrl: match[1] });
            }
        });
        child.on('exit', (code) => reject(new Error(`the scripted LLM exited (${code})`)));
    });
}

describe('an optimization with the real server', { skip: found.reason, timeout: 240_000 }, () => {
    let ext: { activate(c: unknown): Promise<void>; deactivate(): Promise<void> };
    let context: any;
    let llm: { process: ChildProcess; baseUrl: string };
    const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'cuda-llm-vscode-'));
    const uri = pathToFileURL(SAXPY).toString();

    before(async () => {
        const python = found.python!;
        // History and previews go to the scratch directory, never the user's.
        process.env.CUDA_LLM_DATA_DIR = path.join(scratch, 'data');
        process.env.XDG_CACHE_HOME = path.join(scratch, 'cache');
        llm = await startLlm(python, scratch);
        const M = Module as unknown as { _resolveFilename: (request: string, ...rest: unknown[]) => string };
        const original = M._resolveFilename;
        M._resolveFilename = function (request: string, ...rest: unknown[]) {
            return request === 'vscode' ? require.resolve('./fakeVscode') : original.call(this, request, ...rest);
        };
        delete require.cache[BUNDLE];
        ext = require(BUNDLE);
        fake.reset();
        fake.settings.clear();
        for (const [key, spec] of Object.entries<any>(MANIFEST.contributes.configuration.properties)) {
            fake.settings.set(key, spec.default);
        }
        const server = [python, path.join(REPO, 'tests', 'lsp', 'servers', 'recorded_server.py'), path.join(DATA, 'recording.json')];
        fake.settings.set('cudaLlm.server.command', server);
        fake.settings.set('cudaLlm.trace.server', 'verbose');
        fake.settings.set('cudaLlm.model', 'scripted-model');
        fake.settings.set('cudaLlm.baseUrl', llm.baseUrl);
        fake.settings.set('cudaLlm.rounds', 1);
        fake.settings.set('cudaLlm.candidates', 1);
        fake.secrets.set('cudaLlm.apiKey', 'sk-test-not-a-real-key');
        fake.documents.push(makeDocument(uri, 'cuda-cpp', fs.readFileSync(SAXPY, 'utf8')));
        context = makeContext();
        await ext.activate(context);
    });

    after(async () => {
        await ext?.deactivate();
        context?.subscriptions.forEach((d: { dispose(): unknown }) => d.dispose());
        llm?.process.kill();
        fs.rmSync(scratch, { recursive: true, force: true });
        await until('the LLM exits', () => llm === undefined || llm.process.exitCode !== null || llm.process.signalCode !== null);
        assert.deepEqual(liveChildren(), [], 'no server process outlives deactivate');
    });

    it('opens the diff from the notification the server sends when the job ends', async () => {
        let offered: { text: string; items: string[]; original?: string; suggested?: string; title?: unknown } | undefined;
        fake.answer = (text, items) => {
            if (text.includes('saxpy is 2.00× faster')) {
                // What the diff beside the notification shows, read before the answer closes it.
                const diff = fake.executed.find((e) => e.id === 'vscode.diff');
                const provider = fake.contentProviders.get('cuda-llm-suggestion');
                offered = {
                    text,
                    items,
                    original: diff && provider?.provideTextDocumentContent(diff.args[0] as any),
                    suggested: diff && provider?.provideTextDocumentContent(diff.args[1] as any),
                    title: diff?.args[2],
                };
                return 'Reject';
            }
            return undefined;
        };
        await until('running', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri, kernel: 'saxpy' });
        const progress = await until('progress', () => fake.progress.find((p) => p.title === 'Optimizing saxpy'));
        await until('progress end', () => progress.done, 180_000);
        await until('the Accept / Reject notification', () => offered);
        assert.deepEqual(offered!.items, ['Accept', 'Reject', 'Show Diff']);
        assert.match(offered!.original ?? '', /y\[i\] = a \* x\[i\] \+ y\[i\];/);
        assert.equal(offered!.suggested?.trim(), FAST);
        assert.match(String(offered!.title), /^saxpy: original ↔ suggested \(2\.00× faster, 3\/3 cases\)/);
        await until('cudaLlm.reject sent', () => /"command": "cudaLlm\.reject"/.test(fake.output));
        // The server's own suggestion message and preview are for other editors.
        assert.ok(!fake.messages.some((m) => m.text.includes("code action 'Accept optimized saxpy'")), JSON.stringify(fake.messages));
        assert.ok(!/"command": "cudaLlm\.showSuggestion"/.test(fake.output), 'the extension did not need to ask for it');
        assert.ok(!fake.output.includes('window/showDocument'));
        assert.ok(!fs.existsSync(path.join(scratch, 'cache', 'cuda-llm-lsp', 'suggestions')), 'no preview written');
        await until('idle status', () => fake.statusBar.text === '$(zap) CUDA-LLM');
    });
});
