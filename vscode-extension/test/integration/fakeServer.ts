/**
 * A scripted language server speaking real JSON-RPC over stdio, standing in for
 * `python -m cuda_llm_lsp` in the activation test. It logs every message it receives (one JSON
 * per line) to the file named by its first argument, and plays the server's side of the contract:
 * executeCommandProvider, work-done progress for `cudaLlm.optimize`, `cudaLlm/suggestion`,
 * and cancellation by `window/workDoneProgress/cancel`.
 */

import * as fs from 'node:fs';

const logFile = process.argv[2];
/** `--stubborn`: never answers `shutdown`, ignores `exit`, stdin's end and SIGTERM (a hung server). */
const stubborn = process.argv.includes('--stubborn');
if (logFile === undefined) {
    process.stderr.write('usage: fakeServer.js LOG_FILE\n');
    process.exit(2);
}
let buffer = Buffer.alloc(0);
let nextId = 1;
const pending = new Map<number, (result: unknown) => void>();
const jobs = new Map<string, { kernel: string; uri: string }>();

type Message = { id?: number | string; method?: string; params?: any; result?: unknown; error?: unknown };

function send(message: object): void {
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message }), 'utf8');
    process.stdout.write(`Content-Length: ${body.length}\r\n\r\n`);
    process.stdout.write(body);
}

function request(method: string, params: unknown): Promise<unknown> {
    const id = nextId++;
    send({ id, method, params });
    return new Promise((resolve) => pending.set(id, resolve));
}

function notify(method: string, params: unknown): void {
    send({ method, params });
}

const SUGGESTED = '__global__ void saxpy(int n, float a, const float* x, float* y) { /* faster */ }';


function suggestion(uri: string, kernel: string): object {
    return {
        uri,
        kernel,
        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 60 } },
        original: `__global__ void ${kernel}(int n, float a, const float* x, float* y) { /* slow */ }`,
        suggested: SUGGESTED.replace('saxpy', kernel),
        speedup: 2.1,
        baselineMs: 0.42,
        bestMs: 0.2,
        casesPassed: 4,
        casesTotal: 4,
        message: 'vectorised loads',
    };
}

function jobToken(kernel: string): string {
    return `job-${kernel}`;
}

async function startJob(uri: string, kernel: string): Promise<void> {
    const token = jobToken(kernel);
    jobs.set(token, { uri, kernel });
    await request('window/workDoneProgress/create', { token });
    notify('$/progress', { token, value: { kind: 'begin', title: `Optimizing ${kernel}`, cancellable: true, message: 'round 1/4', percentage: 0 } });
    notify('$/progress', { token, value: { kind: 'report', message: 'round 1/4: best 1.80×', percentage: 25 } });
    if (kernel === 'saxpy' || kernel === 'stale') {
        // Announces the suggestion itself, then ends.
        setTimeout(() => {
            notify('cudaLlm/suggestion', suggestion(uri, kernel));
            notify('$/progress', { token, value: { kind: 'end', message: '2.10× faster, 4/4 cases: suggestion ready' } });
            jobs.delete(token);
        }, 300);
    } else if (kernel === 'quiet') {
        // Only says so in the end message; sends the suggestion on cudaLlm.showSuggestion.
        setTimeout(() => {
            notify('$/progress', { token, value: { kind: 'end', message: '2.10× faster, 4/4 cases: suggestion ready' } });
            jobs.delete(token);
        }, 300);
    }
    // Other kernels run until cancelled.
}

function record(entry: object): void {
    try {
        fs.appendFileSync(logFile, `${JSON.stringify(entry)}\n`);
    } catch {
        // The test may already have removed its directory while the client shuts us down.
    }
}

function handle(message: Message): void {
    record(message);
    if (message.method === undefined) {
        const resolve = pending.get(Number(message.id));
        pending.delete(Number(message.id));
        resolve?.(message.result);
        return;
    }
    switch (message.method) {
        case 'initialize':
            // A careless server logging its options: the client must redact the key from its output.
            process.stderr.write(`initializationOptions: ${JSON.stringify(message.params.initializationOptions)}\n`);
            send({
                id: message.id,
                result: {
                    capabilities: {
                        executeCommandProvider: {
                            commands: [
                                'cudaLlm.optimize',
                                'cudaLlm.benchmark',
                                'cudaLlm.accept',
                                'cudaLlm.reject',
                                'cudaLlm.cancel',
                                'cudaLlm.showSuggestion',
                                'cudaLlm.addSpec',
                            ],
                        },
                    },
                    serverInfo: { name: 'fake-cuda-llm-lsp', version: '0' },
                },
            });
            return;
        case 'initialized':
            void request('workspace/configuration', { items: [{ section: 'cudaLlm' }, { section: 'cudaLlm.model' }] }).then((result) => record({ configurationAnswer: result }));
            return;
        case 'workspace/executeCommand': {
            const { command, arguments: args } = message.params;
            if (command === 'cudaLlm.addSpec' && args[0].kernel === 'crash') {
                process.exit(3);
            }
            if (command === 'cudaLlm.optimize') {
                send({ id: message.id, result: { token: jobToken(args[0].kernel) } });
                void startJob(args[0].uri, args[0].kernel);
                return;
            }
            if (command === 'cudaLlm.accept' && args[0].kernel === 'stale') {
                // Refuses as the real server does a confirmed Accept of a changed kernel: the
                // reason in the answer, no message of its own.
                const reason = 'stale changed since the optimization started, so the suggestion was not applied';
                send({ id: message.id, result: { applied: false, reason } });
                return;
            }
            send({ id: message.id, result: command === 'cudaLlm.accept' ? true : null });
            if (command === 'cudaLlm.benchmark') {
                // As the real server without a GPU: a warning longer than a notification's line.
                notify('window/showMessage', { type: 2, message: `cuda-llm: cannot benchmark ${args[0].kernel}: no GPU (no CUDA driver: "cuda" is an NVIDIA driver library and can only be found via system search. Ensure the NVIDIA display driver is installed.)` });
                notify('window/logMessage', { type: 3, message: 'benchmark asked' });
            }
            if (command === 'cudaLlm.showSuggestion') {
                notify('cudaLlm/suggestion', suggestion(args[0].uri, args[0].kernel));
            }
            if (command === 'cudaLlm.cancel') {
                for (const token of [...jobs.keys()]) {
                    notify('$/progress', { token, value: { kind: 'end', message: 'cancelled' } });
                    jobs.delete(token);
                }
            }
            return;
        }
        case 'window/workDoneProgress/cancel': {
            const token = message.params.token;
            if (jobs.delete(token)) {
                notify('$/progress', { token, value: { kind: 'end', message: 'cancelled' } });
            }
            return;
        }
        case 'shutdown':
            if (!stubborn) {
                send({ id: message.id, result: null });
            }
            return;
        case 'exit':
            if (!stubborn) {
                process.exit(0);
            }
            return;
        default:
            if (message.id !== undefined) {
                send({ id: message.id, result: null });
            }
    }
}

process.stdin.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
        const headerEnd = buffer.indexOf('\r\n\r\n');
        if (headerEnd < 0) {
            return;
        }
        const match = /Content-Length: (\d+)/i.exec(buffer.subarray(0, headerEnd).toString());
        const length = Number(match?.[1] ?? 0);
        if (buffer.length < headerEnd + 4 + length) {
            return;
        }
        const body = buffer.subarray(headerEnd + 4, headerEnd + 4 + length).toString('utf8');
        buffer = buffer.subarray(headerEnd + 4 + length);
        handle(JSON.parse(body) as Message);
    }
});
if (stubborn) {
    process.on('SIGTERM', () => record({ signal: 'SIGTERM' }));
    setInterval(() => undefined, 1000);
} else {
    process.stdin.on('end', () => process.exit(0));
}
record({ argv: process.argv.slice(2), pid: process.pid, cwd: process.cwd(), safePath: process.env.PYTHONSAFEPATH ?? null });
process.stderr.write('fake server started\n');
