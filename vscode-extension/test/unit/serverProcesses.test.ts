import assert from 'node:assert/strict';
import * as os from 'node:os';
import { describe, it } from 'node:test';
import { ServerProcesses } from '../../src/common/serverProcesses';

/** A stand-in server: exits when its stdin ends, unless it is stubborn (then only SIGKILL works). */
function server(stubborn: boolean) {
    const code = stubborn
        ? "process.on('SIGTERM', () => {}); process.stdin.resume(); setInterval(() => {}, 1000); console.log('ready');"
        : "process.stdin.resume(); process.stdin.on('end', () => process.exit(0));";
    return { command: process.execPath, args: ['-e', code], python: process.execPath };
}

describe('server processes', () => {
    it('ends a server that exits when its stdin closes, without signals', async () => {
        const processes = new ServerProcesses();
        const child = await processes.spawn(server(false), os.tmpdir());
        assert.equal(processes.count, 1);
        await processes.terminate(2000);
        assert.equal(child.exitCode, 0);
        assert.equal(processes.count, 0);
    });

    it('kills one that ignores stdin and SIGTERM', async () => {
        const processes = new ServerProcesses();
        const child = await processes.spawn(server(true), os.tmpdir());
        await new Promise((resolve) => child.stdout!.once('data', resolve)); // its SIGTERM handler is set
        await processes.terminate(200);
        assert.equal(child.signalCode, 'SIGKILL');
        assert.equal(processes.count, 0);
    });

    it('ends the previous server when the library asks for a new one', async () => {
        const processes = new ServerProcesses();
        const first = await processes.spawn(server(false), os.tmpdir());
        const second = await processes.spawn(server(false), os.tmpdir());
        await new Promise<void>((resolve) => (first.exitCode !== null ? resolve() : first.once('exit', () => resolve())));
        assert.equal(first.exitCode, 0);
        assert.equal(second.exitCode, null);
        assert.equal(processes.count, 1);
        await processes.terminate();
    });

    it('adds the launch\'s variables to the server\'s environment', async () => {
        const processes = new ServerProcesses();
        const code = "process.stdout.write(String(process.env.CUDA_LLM_EVALUATOR)); process.stdin.resume(); process.stdin.on('end', () => process.exit(0));";
        const child = await processes.spawn({ command: process.execPath, args: ['-e', code], env: { CUDA_LLM_EVALUATOR: 'recorded:/r.json' } }, os.tmpdir());
        const said = await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString())));
        assert.equal(said, 'recorded:/r.json');
        await processes.terminate(2000);
    });

    it('rejects with the reason when the command cannot be started', async () => {
        const processes = new ServerProcesses();
        await assert.rejects(processes.spawn({ command: '/nonexistent/python', args: [], python: '/nonexistent/python' }, os.tmpdir()), /cannot start \/nonexistent\/python: .*ENOENT/);
        assert.equal(processes.count, 0);
    });
});
