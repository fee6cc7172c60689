# What native_stack.rb and native_yjit.rb write of their threads into
# OUT_DIR/expected.json, by hand (no gems): JSON strings, a thread's
# backtrace_locations as frames, and its kernel thread id where Ruby tells
# it (3.1+).

def json_str(s)
  return "null" if s.nil?
  '"' + s.to_s.gsub(/[\\"]/) { |c| "\\" + c }.gsub(/[\x00-\x1f]/) { |c| format("\\u%04x", c.ord) } + '"'
end

def frames_json(locs)
  "[" + (locs || []).map do |l|
    "{\"label\": #{json_str(l.label)}, \"path\": #{json_str(l.path)}, \"lineno\": #{l.lineno}}"
  end.join(", ") + "]"
end

def tid_of(t)
  t.respond_to?(:native_thread_id) ? (t.native_thread_id || -1) : -1
end
