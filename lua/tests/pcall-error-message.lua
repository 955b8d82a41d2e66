local function g()
  error('raised in g')
end
local ok, e = pcall(g)
if not ok then return e end
