# A small Ruby program to point rbpeek at: a few named threads doing
# recognisable things, then parked. `scripts/demo.sh` runs it.
class Inventory
  def restock(items)
    items.each_slice(2) do |pair|
      pair.each { |item| wait_for_supplier(item) }
    end
  end

  def wait_for_supplier(item)
    SUPPLIES.pop if item == :bolts
  end
end

SUPPLIES = Queue.new
LOCK = Mutex.new

workers = []
workers << Thread.new { Thread.current.name = "restocker"; Inventory.new.restock(%i[nuts bolts screws]) }
workers << Thread.new { Thread.current.name = "ticker"; loop { sleep 1 } }
workers << Thread.new { Thread.current.name = "reporter"; LOCK.synchronize { sleep } }

File.write(ARGV[0], Process.pid.to_s) if ARGV[0]
workers.each(&:join)
