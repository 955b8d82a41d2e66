-- a multi-line script with a trailing newline
local out = {}
for i = 1, #KEYS do
  out[#out + 1] = KEYS[i]
  out[#out + 1] = ARGV[i] or false
end
return out
