-- cuda-llm-lsp for Neovim 0.7+ (no plugins needed): copy into your init.lua.
-- Optional, before this block:
--   vim.g.cuda_llm_cmd = { 'cuda-llm-lsp' }            -- how to start the server
--   vim.g.cuda_llm_settings = { model = 'gpt-4o-mini', rounds = 4, candidates = 4 }
--   vim.g.cuda_llm_trusted = false  -- browsing clones you do not trust: see below
-- vim.g.cuda_llm_settings is your own configuration. Do not fill it from a project's files (an
-- exrc or a .nvim.lua of a repository you cloned): includePaths, nvrtcFlags, baseUrl and cluster
-- are then the repository's choice. NVRTC options still pass the server's allow-list.
-- Trust: Neovim has no workspace trust, so the snippet sends vim.g.cuda_llm_trusted (default
-- true) as workspaceTrusted. false: the server reads nothing outside the project root and the
-- toolkit, and runs no nvcc check. Either way no file of the project is ever run or imported.
-- The server starts in a directory of its own (never the project: `python -m` would import a
-- repository's argparse.py from there) with PYTHONSAFEPATH=1.
--   vim.g.cuda_llm_settings = { demo = true }  -- the demo: recorded answers, no GPU, no key
--   vim.g.cuda_llm_settings = { persistentPch = true }  -- first diagnostics of a file with
-- heavy headers (cooperative_groups) in ~0.5 s in a new session: their PCH is kept in your cache,
-- and the processes checking your files run without address-space randomization. Your own code
-- only (off by default; the server refuses it when vim.g.cuda_llm_trusted is false).
-- In a CUDA buffer: K shows the hover (a kernel's resources and spec); code actions (Optimize,
-- Benchmark, Accept, Reject, ...): :lua vim.lsp.buf.code_action()
-- Progress shows in the command line and the server's messages in full, with no plugin.
local cuda_llm_clients = {}
local cuda_llm_titles = {} -- progress token -> its title (reports and the end carry none)

-- $/progress: Neovim's own handler first (progress plugins keep working), then one line in the
-- command line: a progress line is cut to the window's width (no hit-enter prompt while it runs);
-- the end is shown whole and kept in :messages.
local function cuda_llm_progress(err, result, ctx, config)
  local default = vim.lsp.handlers['$/progress']
  if default then
    default(err, result, ctx, config)
  end
  local value = result and result.value
  if type(value) ~= 'table' then
    return
  end
  local token = tostring(result.token)
  if value.kind == 'begin' then
    cuda_llm_titles[token] = value.title
  end
  local title = cuda_llm_titles[token] or 'cuda-llm'
  if value.kind == 'end' then
    cuda_llm_titles[token] = nil
    local text = 'cuda-llm: ' .. title .. (value.message and (': ' .. value.message) or '')
    vim.api.nvim_echo({ { text } }, true, {})
  else
    -- what changed first, the job's title after it: a narrow window still shows the news
    local text = 'cuda-llm: ' .. (value.message or '') .. ' (' .. title .. ')'
    local width = math.max(vim.o.columns - 12, 20)
    vim.api.nvim_echo({ { vim.fn.strcharpart(text, 0, width) } }, false, {})
  end
end

-- window/showMessage: the whole message (a result, a reason), warnings and errors highlighted.
local function cuda_llm_show_message(_, result, _, _)
  local levels = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO }
  vim.notify(result.message, levels[result.type] or vim.log.levels.INFO)
end

local function cuda_llm_root(bufnr)
  local file = vim.api.nvim_buf_get_name(bufnr)
  local dir = vim.fn.fnamemodify(file, ':p:h')
  local marker = vim.fn.finddir('.git', dir .. ';')
  if marker ~= '' then
    return vim.fn.fnamemodify(marker, ':p:h:h')
  end
  return dir
end

-- Where the server starts: an empty directory of its own, never the project.
local function cuda_llm_cwd()
  local dir = vim.fn.stdpath('cache') .. '/cuda-llm-lsp'
  vim.fn.mkdir(dir, 'p')
  return dir
end

-- An empty Lua table is encoded as a JSON array; the server expects an object.
local function cuda_llm_settings()
  local settings = vim.g.cuda_llm_settings
  if type(settings) ~= 'table' or vim.tbl_isempty(settings) then
    return vim.empty_dict()
  end
  return settings
end

local function cuda_llm_attach(bufnr)
  local root = cuda_llm_root(bufnr)
  local id = cuda_llm_clients[root]
  if id == nil or vim.lsp.get_client_by_id(id) == nil then
    local settings = cuda_llm_settings()
    local trusted = vim.g.cuda_llm_trusted ~= false
    id = vim.lsp.start_client({
      name = 'cuda-llm',
      cmd = vim.g.cuda_llm_cmd or { 'cuda-llm-lsp' },
      cmd_cwd = cuda_llm_cwd(),
      cmd_env = { PYTHONSAFEPATH = '1' },
      root_dir = root,
      init_options = { cudaLlm = settings, workspaceTrusted = trusted },
      settings = { cudaLlm = settings, workspaceTrusted = trusted },
      handlers = {
        ['$/progress'] = cuda_llm_progress,
        ['window/showMessage'] = cuda_llm_show_message,
      },
    })
    cuda_llm_clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
    -- Buffer-local, so K keeps opening `man` elsewhere (vim.keymap.set is 0.7+ too; this is older).
    vim.api.nvim_buf_set_keymap(
      bufnr, 'n', 'K', '<cmd>lua vim.lsp.buf.hover()<CR>', { noremap = true, silent = true }
    )
  end
end

vim.api.nvim_create_autocmd('FileType', {
  pattern = { 'cuda' },
  callback = function(args)
    cuda_llm_attach(args.buf)
  end,
})
