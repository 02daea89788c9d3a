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
import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { fake, makeContext, makeDocument } from './fakeVscode';
import { ExtensionModule, REPO, findPython, liveChildren, loadBundle, offerOf, resetSettings, until } from './helpers';

const DATA = path.join(REPO, 'tests', 'lsp', 'data');
const SAXPY = path.join(DATA, 'saxpy.cu');
const FAST = `extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    // variant: fast
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}`;

const found = fs.existsSync(SAXPY)
    ? findPython('import cuda_llm_lsp.lsp.app, cuda_llm_lsp.evaluate.recorded, tests.support.scripted_llm', 'cuda_llm_lsp and its tests')
    : { reason: 'tests/lsp/data/saxpy.cu is missing' };

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
    let ext: ExtensionModule;
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
        ext = loadBundle();
        fake.reset();
        resetSettings();
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
        await until('running', () => fake.statusBar.text === '$(zap) CUDA-LLM');
        await fake.commands.get('cudaLlm.client.optimizeKernel')!({ uri, kernel: 'saxpy' });
        const progress = await until('progress', () => fake.progress.find((p) => p.title === 'Optimizing saxpy'));
        await until('progress end', () => progress.done, 180_000);
        const offer = await until('the diff and its notification', () => offerOf('saxpy 2.00× faster'));
        assert.equal(offer.notice.title, 'cuda-llm: saxpy 2.00× faster (1.00 ms → 500 µs), 3/3 cases');
        assert.match(offer.original ?? '', /y\[i\] = a \* x\[i\] \+ y\[i\];/);
        assert.equal(offer.suggested?.trim(), FAST);
        assert.match(String(offer.diff.args[2]), /^saxpy: original ↔ suggested \(2\.00× faster, 3\/3 cases\)/);
        await fake.commands.get('cudaLlm.client.rejectSuggestion')!(offer.diff.args[1]);
        await until('the notification closes', () => offer.notice.done);
        await until('cudaLlm.reject sent', () => /"command": "cudaLlm\.reject"/.test(fake.output));
        // The server's own suggestion message and preview are for other editors.
        assert.ok(!fake.messages.some((m) => m.text.includes("code action 'Accept optimized saxpy'")), JSON.stringify(fake.messages));
        assert.ok(!/"command": "cudaLlm\.showSuggestion"/.test(fake.output), 'the extension did not need to ask for it');
        assert.ok(!fake.output.includes('window/showDocument'));
        assert.ok(!fs.existsSync(path.join(scratch, 'cache', 'cuda-llm-lsp', 'suggestions')), 'no preview written');
        await until('idle status', () => fake.statusBar.text === '$(zap) CUDA-LLM');
    });
});
