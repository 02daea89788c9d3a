/** The language server's processes (no `vscode` import: unit-tested in node). */

import { ChildProcess, spawn } from 'node:child_process';
import { ServerLaunch, serverEnv } from './serverCommand';

/**
 * The server processes a client started (one per library restart), so that stopping can make
 * sure none outlives the session: the library's own fallback kill depends on a shell script that
 * a bundled extension does not have, and a server that misses `shutdown`/`exit` would otherwise
 * run on, holding its pipes and the editor's (or a test run's) event loop.
 */
export class ServerProcesses {
    private readonly live = new Set<ChildProcess>();

    /**
     * Starts the server on stdio; rejects with the spawn error (a missing command, say). The
     * library asks for a new process only after the connection to the last one closed (a crash,
     * or errors on the stream); one that is still running then talks to nobody, so it is ended.
     * `cwd` is the extension's neutral directory, never a workspace folder (see `serverEnv`).
     */
    spawn(launch: ServerLaunch, cwd: string): Promise<ChildProcess> {
        void this.terminate();
        const env = serverEnv(launch);
        const child = spawn(launch.command, [...launch.args], { cwd, env, stdio: 'pipe' });
        return new Promise((resolve, reject) => {
            let started = false;
            child.once('spawn', () => {
                started = true;
                this.live.add(child);
                child.once('exit', () => this.live.delete(child));
                resolve(child);
            });
            // Also after the start (a failed kill, say): an 'error' without a listener would
            // throw in the extension host.
            child.on('error', (err) => {
                if (!started) {
                    reject(new Error(`cannot start ${launch.command}: ${err.message}`));
                }
            });
        });
    }

    get count(): number {
        return this.live.size;
    }

    /**
     * Waits `graceMs` for each server still running to exit by itself (it does after `exit`, or
     * when its stdin closes), then sends SIGTERM, and SIGKILL `graceMs` later.
     */
    async terminate(graceMs = 2000): Promise<void> {
        await Promise.all([...this.live].map((child) => terminateChild(child, graceMs)));
    }
}

function exited(child: ChildProcess, ms: number): Promise<boolean> {
    if (child.exitCode !== null || child.signalCode !== null) {
        return Promise.resolve(true);
    }
    return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        child.once('exit', () => {
            clearTimeout(timer);
            resolve(true);
        });
    });
}

async function terminateChild(child: ChildProcess, graceMs: number): Promise<void> {
    if (child.stdin && !child.stdin.destroyed) {
        child.stdin.on('error', () => undefined); // EPIPE from a server already on its way out
        child.stdin.end();
    }
    if (await exited(child, graceMs)) {
        return;
    }
    child.kill('SIGTERM');
    if (!(await exited(child, graceMs))) {
        child.kill('SIGKILL');
        await exited(child, graceMs);
    }
}
