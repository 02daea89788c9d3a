-- Test harness for real headless Neovim: the README's snippet (docs/neovim.lua), configured
-- from the environment the pytest test sets, then the scenario named by CUDA_LLM_TEST_SCENARIO.
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'
vim.g.cuda_llm_cmd = vim.fn.json_decode(vim.env.CUDA_LLM_LSP_CMD)
-- Unset means the user set nothing (the snippet's default); '{}' is `vim.g.cuda_llm_settings = {}`.
if vim.env.CUDA_LLM_SETTINGS == '{}' then
  vim.g.cuda_llm_settings = {}
elseif vim.env.CUDA_LLM_SETTINGS then
  vim.g.cuda_llm_settings = vim.fn.json_decode(vim.env.CUDA_LLM_SETTINGS)
end
if vim.env.CUDA_LLM_TRUSTED == 'false' then
  vim.g.cuda_llm_trusted = false
end
dofile(vim.env.CUDA_LLM_REPO .. '/docs/neovim.lua')
