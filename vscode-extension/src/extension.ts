/** Entry point: VS Code calls `activate` when a CUDA file (`cuda-cpp`) is opened. */

import type { ExtensionContext } from 'vscode';
import { Session } from './session';

let session: Session | undefined;

export async function activate(context: ExtensionContext): Promise<void> {
    session = new Session(context);
    await session.activate();
}

export async function deactivate(): Promise<void> {
    await session?.dispose();
    session = undefined;
}
