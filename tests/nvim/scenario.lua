-- Scenarios run by tests/nvim/test_neovim.py in headless Neovim 0.7; results go to a JSON file.
local out = {}
local bufnr = vim.api.nvim_get_current_buf()

local function finish()
  local file = io.open(vim.env.CUDA_LLM_TEST_OUT, 'w')
  file:write(vim.fn.json_encode(out))
  file:close()
  vim.cmd('qa!')
end

local function ready()
  local _, client = next(vim.lsp.buf_get_clients(bufnr))
  return client ~= nil and client.server_capabilities ~= nil
end

local function line_of(needle)
  for i, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if line:find(needle, 1, true) then
      return i - 1
    end
  end
  return nil
end

local function code_actions(line)
  local params = {
    textDocument = vim.lsp.util.make_text_document_params(bufnr),
    range = { start = { line = line, character = 4 }, ['end'] = { line = line, character = 4 } },
    context = { diagnostics = {} },
  }
  local titles = {}
  local results = vim.lsp.buf_request_sync(bufnr, 'textDocument/codeAction', params, 10000) or {}
  for _, result in pairs(results) do
    for _, action in ipairs(result.result or {}) do
      table.insert(titles, action.title)
    end
  end
  return titles
end

-- Choose a code action through Neovim's own code-action path, as a user picking from the menu.
local function choose(line, prefix)
  local chosen = nil
  vim.ui.select = function(items, _, on_choice)
    for _, item in ipairs(items) do
      if item[2].title:sub(1, #prefix) == prefix then
        chosen = item[2].title
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  vim.api.nvim_win_set_cursor(0, { line + 1, 4 })
  vim.lsp.buf.code_action()
  vim.wait(5000, function() return chosen ~= nil end, 50)
  return chosen
end

-- Every message the server shows (window/showMessage) or Neovim notifies, in order.
local function record_messages()
  out.messages = {}
  local show_message = vim.lsp.handlers['window/showMessage']
  vim.lsp.handlers['window/showMessage'] = function(err, result, ctx, config)
    table.insert(out.messages, result.message)
    return show_message(err, result, ctx, config)
  end
  local notify = vim.notify
  vim.notify = function(msg, level, opts)
    table.insert(out.messages, msg)
    return notify(msg, level, opts)
  end
  -- What the command line shows (the snippet echoes progress): text and whether it is kept.
  out.echoes = {}
  local echo = vim.api.nvim_echo
  vim.api.nvim_echo = function(chunks, history, opts)
    local text = ''
    for _, chunk in ipairs(chunks) do
      text = text .. chunk[1]
    end
    table.insert(out.echoes, { text = text, history = history })
    return echo(chunks, history, opts)
  end
end

-- The demo (cudaLlm.demo): Optimize from the menu, wait for the suggestion, then Accept and one
-- `u`, or Reject; what the code-action menu offered at each step.
local function demo(decision)
  local body = line_of('int row = blockIdx.x;')
  out.original = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  vim.wait(60000, function() return #code_actions(body) > 0 end, 200)
  out.actions = code_actions(body)
  out.optimize = choose(body, 'Optimize ')
  local accept = nil
  vim.wait(180000, function()
    for _, title in ipairs(code_actions(body)) do
      if title:sub(1, 7) == 'Accept ' then
        accept = title
        return true
      end
    end
    return false
  end, 200)
  out.accept_title = accept
  if not accept then
    return
  end
  if decision == 'reject' then
    out.rejected = choose(body, 'Reject ')
    vim.wait(5000, function()
      for _, title in ipairs(code_actions(body)) do
        if title:sub(1, 7) == 'Accept ' then return false end
      end
      return true
    end, 100)
    out.after_actions = code_actions(body)
    out.after_reject = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
    return
  end
  local before = vim.fn.undotree()
  out.accepted = choose(body, 'Accept ')
  vim.wait(30000, function() return line_of('variant: online softmax') ~= nil end, 50)
  out.after_accept = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local after = vim.fn.undotree()
  out.accept_undo_states = after.seq_last - before.seq_last
  vim.cmd('undo')
  out.after_undo = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

local function floating_lines()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= '' then
      return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false)
    end
  end
  return nil
end

local scenario = vim.env.CUDA_LLM_TEST_SCENARIO
record_messages()
out.attached = vim.wait(20000, ready, 50)

if scenario == 'diagnostics' then
  vim.wait(60000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(out.diagnostics, {
      lnum = d.lnum, col = d.col, severity = d.severity, message = d.message, source = d.source,
    })
  end
elseif scenario == 'optimize' then
  local body = line_of('y[i] = a * x[i] + y[i];')
  out.original = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  out.actions = code_actions(body)
  out.optimize = choose(body, 'Optimize ')
  local accept = nil
  vim.wait(120000, function()
    for _, title in ipairs(code_actions(body)) do
      if title:sub(1, 7) == 'Accept ' then
        accept = title
        return true
      end
    end
    return false
  end, 200)
  out.accept_title = accept
  if accept then
    local before = vim.fn.undotree()
    out.accepted = choose(body, 'Accept ')
    vim.wait(30000, function() return line_of('variant: fast') ~= nil end, 50)
    out.after_accept = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
    local after = vim.fn.undotree()
    -- the changes the Accept made: undo states added and entries added to the undo tree
    out.accept_undo_states = after.seq_last - before.seq_last
    out.accept_undo_entries = #after.entries - #before.entries
    vim.cmd('undo')
    out.after_undo = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
    out.undo_seq_after_undo = vim.fn.undotree().seq_cur
    out.undo_seq_before_accept = before.seq_cur
  end
elseif scenario == 'no_spec' then
  local body = line_of('m[r * cols + c] *= 0.5f;')
  vim.wait(60000, function() return #code_actions(body) > 0 end, 200)
  out.actions = code_actions(body)
elseif scenario == 'capture' then
  -- "Capture test spec for K from program…" from the menu (cudaLlm.captureCommand set in
  -- vim.g.cuda_llm_settings): the spec arrives as one edit; saved, "Verify K" then runs.
  local body = line_of('out[i] = a * in[i];')
  out.original = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  vim.wait(60000, function() return #code_actions(body) > 0 end, 200)
  out.actions = code_actions(body)
  local before = vim.fn.undotree()
  out.capture = choose(body, 'Capture test spec for ')
  vim.wait(60000, function() return line_of('capture = ') ~= nil end, 100)
  out.after_capture = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  out.capture_undo_states = vim.fn.undotree().seq_last - before.seq_last
  body = line_of('out[i] = a * in[i];')
  vim.wait(30000, function()
    for _, title in ipairs(code_actions(body)) do
      if title:sub(1, 7) == 'Verify ' then return true end
    end
    return false
  end, 200)
  out.after_actions = code_actions(body)
  vim.cmd('silent write')
  out.verify = choose(body, 'Verify ')
  local function verified()
    local items = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      if d.source == 'cuda-llm verify' then
        table.insert(items, { lnum = d.lnum, severity = d.severity, message = d.message })
      end
    end
    return items
  end
  vim.wait(60000, function() return #verified() > 0 end, 100)
  out.verify_diagnostics = verified()
  out.kernel_line = line_of('void scale')
elseif scenario == 'demo' or scenario == 'demo_reject' then
  demo(scenario == 'demo' and 'accept' or 'reject')
elseif scenario == 'hover' then
  -- Press K on the kernel's name, as a user would; the hover opens in a floating window.
  local name = line_of('void saxpy')
  local col = vim.api.nvim_buf_get_lines(bufnr, name, name + 1, false)[1]:find('saxpy', 1, true)
  vim.wait(60000, function()
    vim.lsp.codelens.refresh()
    vim.wait(500)
    return #vim.lsp.codelens.get(bufnr) > 0
  end, 100)
  vim.api.nvim_win_set_cursor(0, { name + 1, col })
  out.mapping = vim.fn.maparg('K', 'n')
  vim.api.nvim_feedkeys('K', 'mx', false)
  vim.wait(10000, function() return floating_lines() ~= nil end, 50)
  out.hover = floating_lines()
elseif scenario == 'profile' then
  -- Profile K from the code-action menu; the findings arrive as diagnostics, K shows figures.
  local name = line_of('void transpose_header')
  out.actions = code_actions(name)
  out.profile = choose(name, 'Profile ')
  local function found()
    local items = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      if d.source == 'cuda-llm profile' then
        table.insert(items, { lnum = d.lnum, severity = d.severity, message = d.message })
      end
    end
    return items
  end
  vim.wait(120000, function() return #found() > 0 end, 100)
  out.name_line = name
  out.profile_diagnostics = found()
  local include = line_of('#include "planted_helpers.cuh"')
  vim.api.nvim_win_set_cursor(0, { include + 1, 12 })
  vim.api.nvim_feedkeys('K', 'mx', false)
  vim.wait(10000, function() return floating_lines() ~= nil end, 50)
  out.hover = floating_lines()
elseif scenario == 'launch' then
  -- Where and how the snippet started the server, and what it said of trust.
  local _, client = next(vim.lsp.buf_get_clients(bufnr))
  out.cmd_cwd = client and client.config.cmd_cwd
  out.safe_path = client and client.config.cmd_env and client.config.cmd_env.PYTHONSAFEPATH
  out.trusted = client and client.config.init_options.workspaceTrusted
  vim.wait(60000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
  out.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(out.diagnostics, { lnum = d.lnum, severity = d.severity, message = d.message })
  end
elseif scenario == 'lens' then
  -- Click the resources lens as a user would (`vim.lsp.codelens.run` on the kernel's line).
  local name = line_of('void saxpy')
  -- Lenses come with the first analysis (saxpy.cu compiles clean: no diagnostic to wait for).
  vim.wait(60000, function()
    vim.lsp.codelens.refresh()
    vim.wait(500)
    return #vim.lsp.codelens.get(bufnr) > 0
  end, 100)
  out.lenses = {}
  for _, lens in ipairs(vim.lsp.codelens.get(bufnr)) do
    if lens.command then
      table.insert(out.lenses, {
        title = lens.command.title, command = lens.command.command, line = lens.range.start.line,
      })
    end
  end
  local chosen = nil
  vim.ui.select = function(items, opts, on_choice)
    for _, item in ipairs(items) do
      local title = opts.format_item and opts.format_item(item) or item.lens.command.title
      if vim.startswith(title, 'saxpy · ') then
        chosen = title
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  vim.api.nvim_win_set_cursor(0, { name + 1, 0 })
  out.name_line = name
  vim.lsp.codelens.run()
  out.chosen = chosen
  vim.wait(10000, function()
    for _, m in ipairs(out.messages) do
      if m:find('Test spec', 1, true) then return true end
    end
    return false
  end, 50)
end
finish()
