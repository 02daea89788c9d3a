import { ConfigReader } from '../../src/common/settings';

/** A `cudaLlm` section as VS Code would return it (dotted keys relative to the section). */
export function reader(values: Record<string, unknown>): ConfigReader {
    return { get: <T>(key: string) => values[key] as T | undefined };
}
