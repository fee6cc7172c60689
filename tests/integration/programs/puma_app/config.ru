# A Sinatra app for the whole-service test (test_puma.py): Debian's puma
# runs it in clustered mode on 127.0.0.1. /compute spends its time in
# App#crunch (a method of its own, so a profile can find it), /wait
# sleeps (an idle request thread, blocked).
require "sinatra/base"

class App < Sinatra::Base
  set :logging, false

  def crunch(n)
    i = 0
    x = 0
    while i < n
      x = (x * 31 + i) & 0xffff
      i += 1
    end
    x
  end

  get "/compute" do
    crunch(200_000).to_s
  end

  get "/wait" do
    sleep 0.05
    "ok"
  end
end

run App
