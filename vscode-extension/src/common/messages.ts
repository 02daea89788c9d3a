/**
 * How messages reach the user: one prefix for all of them (the server's and ours), and shown in
 * full.
 *
 * VS Code shows a notification without buttons on one line, cut off with "…" (the no-GPU warning
 * lost its reason that way); a notification with a button is shown expanded. So a message longer
 * than a line gets a "Show Output" button (the output channel has every message too).
 */

/** The one prefix of every message (the server's messages start with it too; so does the CLI's). */
export const MESSAGE_PREFIX = 'cuda-llm: ';

/** About what one line of a notification toast holds, in characters. */
export const ONE_LINE_CHARS = 56;

export const SHOW_OUTPUT = 'Show Output';

/** `text` with the message prefix, exactly once. */
export function prefixed(text: string): string {
    return text.startsWith(MESSAGE_PREFIX) ? text : `${MESSAGE_PREFIX}${text}`;
}

export type MessageLevel = 'error' | 'warning' | 'info';

export interface MessageView {
    readonly level: MessageLevel;
    readonly text: string;
    /** Buttons: "Show Output" when the text would not fit on one line. */
    readonly items: string[];
}

/** Whether `text` would be cut off in a notification without buttons. */
export function needsExpanding(text: string): boolean {
    return text.length > ONE_LINE_CHARS || text.includes('\n');
}

/** A message of ours or the server's, as it is shown. */
export function messageView(level: MessageLevel, text: string, items: readonly string[] = []): MessageView {
    const full = prefixed(text.trim());
    return { level, text: full, items: items.length === 0 && needsExpanding(full) ? [SHOW_OUTPUT] : [...items] };
}

/** LSP `MessageType` (1 error, 2 warning, 3 info, 4 log, 5 debug) -> how it is shown; log and debug only go to the output. */
export function serverMessageLevel(type: number): MessageLevel | undefined {
    return type === 1 ? 'error' : type === 2 ? 'warning' : type === 3 ? 'info' : undefined;
}
