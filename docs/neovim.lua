-- cuda-llm-lsp for Neovim 0.7+ (no plugins needed): copy into your init.lua.
-- Optional, before this block:
--   vim.g.cuda_llm_cmd = { 'cuda-llm-lsp' }            -- how to start the server
--   vim.g.cuda_llm_settings = { model = 'gpt-4o-mini', rounds = 4, candidates = 4 }
-- vim.g.cuda_llm_settings is your own configuration: the server treats it as trusted (no
-- workspaceTrusted is sent). Do not fill it from a project's files (an exrc or a .nvim.lua
-- of a repository you cloned): includePaths, nvrtcFlags, baseUrl and cluster are then the
-- repository's choice. NVRTC options still pass the server's allow-list.
-- In a CUDA buffer: K shows the hover (a kernel's resources and spec); code actions (Optimize,
-- Benchmark, Accept, Reject, ...): :lua vim.lsp.buf.code_action()
local cuda_llm_clients = {}

local function cuda_llm_root(bufnr)
  local file = vim.api.nvim_buf_get_name(bufnr)
  local dir = vim.fn.fnamemodify(file, ':p:h')
  local marker = vim.fn.finddir('.git', dir .. ';')
  if marker ~= '' then
    return vim.fn.fnamemodify(marker, ':p:h:h')
  end
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
    id = vim.lsp.start_client({
      name = 'cuda-llm',
      cmd = vim.g.cuda_llm_cmd or { 'cuda-llm-lsp' },
      root_dir = root,
      init_options = { cudaLlm = settings },
      settings = { cudaLlm = settings },
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
