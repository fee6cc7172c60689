# The program of docs/native.md's flamegraph: a small job that spends its
# time in C as much as in Ruby, in the standard library's extensions and the
# libraries behind them (json, zlib, digest over OpenSSL), and allocates
# enough for the GC to show. Runs until killed.
#
#   ruby docs/examples/native_demo.rb
require "json"
require "zlib"
require "digest"

def build_records(n)
  Array.new(n) { |i| { "id" => i, "name" => "user-#{i}", "tags" => %w[a b c].map { |t| t * (i % 7 + 1) } } }
end

def encode(records)
  JSON.generate(records)
end

def compress(text)
  Zlib::Deflate.deflate(text, Zlib::BEST_COMPRESSION)
end

def fingerprint(blob)
  Digest::SHA256.hexdigest(blob * 8)
end

def decode(text)
  JSON.parse(text)
end

def index(records)
  records.each_with_object({}) { |r, h| r["tags"].each { |t| (h[t.upcase + r["name"]] ||= []) << r["id"].to_s } }
end

loop do
  records = build_records(4000)
  text = encode(records)
  blob = compress(text)
  fingerprint(blob)
  index(decode(text))
end
