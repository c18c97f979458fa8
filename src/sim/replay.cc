#include "sim/replay.h"

#include "sim/simulate.h"

namespace headroom {

void replay_allocations(const Program& program, CachingAllocator& allocator) {
  check_program_size(program);
  for (const Event& e : program.events) {
    switch (e.kind) {
      case Event::Kind::Alloc: allocator.alloc(e.buffer, program.buffers[static_cast<size_t>(e.buffer)].bytes); break;
      case Event::Kind::Free: allocator.free(e.buffer); break;
      case Event::Kind::Retag: break;  // a category change: the allocator does not see it
    }
  }
}

}  // namespace headroom
