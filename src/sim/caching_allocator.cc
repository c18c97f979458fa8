// PyTorch's CUDA caching allocator, replayed. Stages of one allocation, as in
// DeviceCachingAllocator::malloc:
//   round_size -> pick pool -> get_free_block -> alloc_block (new segment or mapped pages)
//   -> on failure release_available_cached_blocks, alloc_block
//   -> on failure release_cached_blocks, alloc_block(retry) -> on failure OOM
//   -> should_split / split -> mark allocated.
#include "sim/caching_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "util/error.h"

namespace headroom {

namespace cuda_caching {

int64_t round_size(int64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return kMinBlockSize * ((bytes + kMinBlockSize - 1) / kMinBlockSize);
}

int64_t allocation_size(int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace cuda_caching

using namespace cuda_caching;

namespace {

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
int64_t align_down(int64_t v, int64_t a) { return v / a * a; }

// Address range reserved for one expandable segment when capacity is unlimited (PyTorch reserves
// 1 1/8 of the device's memory; with no device we take 1 TiB, larger if one request needs it).
constexpr int64_t kUnlimitedAddressSpace = 1LL << 40;

}  // namespace

CachingAllocator::CachingAllocator(CachingAllocatorOptions options) : options_(options) {
  if (options_.capacity_bytes < 0) {
    throw InputError(fmt::format("allocator capacity must be >= 0 bytes (0 = unlimited), got {}",
                                 options_.capacity_bytes));
  }
  if (options_.max_split_size_bytes != 0 && options_.max_split_size_bytes < kLargeBuffer) {
    throw InputError(
        fmt::format("max_split_size must be at least 20 MiB (PyTorch rejects smaller "
                    "max_split_size_mb), got {} "
                    "bytes",
                    options_.max_split_size_bytes));
  }
  if (options_.max_non_split_rounding_bytes < 0) {
    throw InputError(fmt::format("max_non_split_rounding must be >= 0 bytes, got {}",
                                 options_.max_non_split_rounding_bytes));
  }
}

// ---- block bookkeeping ----------------------------------------------------------------------

int32_t CachingAllocator::new_block(const Block& b) {
  Block nb = b;
  nb.in_use = true;
  if (!free_slots_.empty()) {
    int32_t i = free_slots_.back();
    free_slots_.pop_back();
    blk(i) = nb;
    return i;
  }
  blocks_.push_back(nb);
  return static_cast<int32_t>(blocks_.size()) - 1;
}

void CachingAllocator::delete_block(int32_t i) {
  blk(i) = Block{};
  free_slots_.push_back(i);
}

void CachingAllocator::insert_free(int32_t i) {
  const Block& b = blk(i);
  bool inserted = free_[pool_of(i)].insert({b.size, b.addr, i}).second;
  HEADROOM_CHECK(inserted, "block cached twice");
}

void CachingAllocator::erase_free(int32_t i) {
  const Block& b = blk(i);
  size_t n = free_[pool_of(i)].erase({b.size, b.addr, i});
  HEADROOM_CHECK(n == 1, "cached block missing from its pool");
}

bool CachingAllocator::fits_capacity(int64_t more) const {
  return options_.capacity_bytes == 0 || stats_.reserved_bytes + more <= options_.capacity_bytes;
}

void CachingAllocator::note_reserved_change() {
  stats_.peak_segments = std::max(stats_.peak_segments, stats_.segments);
}

// ---- malloc ---------------------------------------------------------------------------------

void CachingAllocator::alloc(BufferId id, int64_t bytes) {
  HEADROOM_CHECK(id >= 0 && bytes >= 0, "allocation of a negative size or id");
  if (static_cast<size_t>(id) >= buffer_block_.size()) {
    buffer_block_.resize(static_cast<size_t>(id) + 1, -1);
  }
  HEADROOM_CHECK(buffer_block_[static_cast<size_t>(id)] == -1, "buffer allocated twice");
  if (bytes == 0) return;

  const int64_t size = round_size(bytes);
  const Pool pool = size <= kSmallSize ? kSmall : kLarge;
  const int64_t alloc_size = allocation_size(size);

  int32_t b = get_free_block(pool, size);
  if (b < 0) {
    b = alloc_block(pool, size, alloc_size, false, false);
    if (b < 0 && release_available_cached_blocks(pool, size)) {
      b = alloc_block(pool, size, alloc_size, false, false);
    }
    if (b < 0) {
      release_cached_blocks();
      b = alloc_block(pool, size, alloc_size, true, false);
    }
    if (b < 0) {
      stats_.ooms += 1;
      if (!stats_.oom) {
        stats_.oom = true;
        stats_.oom_buffer = id;
        stats_.oom_request_bytes = size;
        stats_.oom_reserved_bytes = stats_.reserved_bytes;
        stats_.oom_allocated_bytes = stats_.allocated_bytes;
      }
      b = alloc_block(pool, size, alloc_size, false, true);
      HEADROOM_CHECK(b >= 0, "allocation failed without a capacity limit");
    }
  }
  if (should_split(b, size)) b = split(b, size);

  Block& blockref = blk(b);
  blockref.allocated = true;
  blockref.owner = id;
  blockref.requested = bytes;
  buffer_block_[static_cast<size_t>(id)] = b;
  stats_.allocated_bytes += blockref.size;
  stats_.requested_bytes += bytes;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  if (stats_.reserved_bytes > stats_.peak_reserved_bytes) {
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
    stats_.allocated_at_reserved_peak = stats_.allocated_bytes;
    stats_.fragmentation_at_reserved_peak = stats_.reserved_bytes - stats_.allocated_bytes;
  }
}

int32_t CachingAllocator::get_free_block(Pool pool, int64_t size) {
  std::set<FreeKey>& cache = free_[pool];
  auto it = cache.lower_bound(
      {size, std::numeric_limits<int64_t>::min(), std::numeric_limits<int32_t>::min()});
  if (it == cache.end()) return -1;
  if (options_.expandable_segments) {
    // A free block at the end of the mapped part of an expandable segment can grow into the
    // unmapped range behind it; for best fit PyTorch counts that room, so it prefers any later
    // (larger) block whose growable size is smaller.
    auto next = std::next(it);
    while (next != cache.end() &&
           expandable_size(std::get<2>(*next)) < expandable_size(std::get<2>(*it))) {
      it = next++;
    }
  }
  const int64_t found = std::get<0>(*it);
  const int64_t max_split = options_.max_split_size_bytes;
  if (max_split != 0) {
    // Do not return an oversized block for a small request.
    if (size < max_split && found >= max_split) return -1;
    // Allow an oversized block to be rounded up, but only within a limit.
    if (size >= max_split && found >= size + options_.max_non_split_rounding_bytes) return -1;
  }
  int32_t b = std::get<2>(*it);
  cache.erase(it);
  return b;
}

bool CachingAllocator::should_split(int32_t block, int64_t size) const {
  const int64_t remaining = blk(block).size - size;
  if (pool_of(block) == kSmall || options_.expandable_segments) return remaining >= kMinBlockSize;
  const bool below_max_split =
      options_.max_split_size_bytes == 0 || size < options_.max_split_size_bytes;
  return below_max_split && remaining > kSmallSize;
}

int32_t CachingAllocator::split(int32_t block, int64_t size) {
  // [block: size][remaining: rest] -- the remainder stays cached.
  Block head;
  head.addr = blk(block).addr;
  head.size = size;
  head.segment = blk(block).segment;
  head.prev = blk(block).prev;
  head.next = block;
  int32_t h = new_block(head);
  if (blk(h).prev >= 0) blk(blk(h).prev).next = h;
  Block& rest = blk(block);
  rest.prev = h;
  rest.addr += size;
  rest.size -= size;
  insert_free(block);
  return h;
}

int32_t CachingAllocator::alloc_block(Pool pool, int64_t size, int64_t alloc_size, bool is_retry,
                                      bool ignore_capacity) {
  if (is_retry) stats_.alloc_retries += 1;
  if (options_.expandable_segments)
    return try_allocate_expandable_block(pool, size, ignore_capacity);
  if (!ignore_capacity && !fits_capacity(alloc_size)) return -1;
  Segment seg;
  seg.pool = pool;
  seg.alive = true;
  seg.base = next_address_;
  seg.size = alloc_size;
  next_address_ += align_up(alloc_size, kRoundLarge) + kRoundLarge;
  segments_.push_back(seg);
  Block b;
  b.addr = seg.base;
  b.size = alloc_size;
  b.segment = static_cast<int32_t>(segments_.size()) - 1;
  stats_.reserved_bytes += alloc_size;
  stats_.segments += 1;
  stats_.device_allocs += 1;
  note_reserved_change();
  return new_block(b);
}

// ---- free -----------------------------------------------------------------------------------

void CachingAllocator::free(BufferId id) {
  HEADROOM_CHECK(id >= 0 && static_cast<size_t>(id) < buffer_block_.size(), "free of unknown id");
  int32_t b = buffer_block_[static_cast<size_t>(id)];
  buffer_block_[static_cast<size_t>(id)] = -1;
  if (b < 0) return;  // a zero-byte buffer
  HEADROOM_CHECK(blk(b).allocated && blk(b).owner == id, "free of a block that is not allocated");
  stats_.allocated_bytes -= blk(b).size;
  stats_.requested_bytes -= blk(b).requested;
  blk(b).allocated = false;
  blk(b).owner = -1;
  blk(b).requested = 0;
  free_block(b);
}

void CachingAllocator::free_block(int32_t block) {
  try_merge(block, blk(block).prev);
  try_merge(block, blk(block).next);
  insert_free(block);
}

int64_t CachingAllocator::try_merge(int32_t dst, int32_t src) {
  if (src < 0 || blk(src).allocated || blk(dst).mapped != blk(src).mapped) return 0;
  Pool pool = pool_of(src);
  if (blk(src).mapped) {
    erase_free(src);
  } else {
    unmapped_[pool].erase({blk(src).addr, src});
  }
  Block& d = blk(dst);
  const Block s = blk(src);
  if (d.prev == src) {  // [src dst]
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev >= 0) blk(d.prev).next = dst;
  } else {  // [dst src]
    d.next = s.next;
    if (d.next >= 0) blk(d.next).prev = dst;
  }
  d.size += s.size;
  delete_block(src);
  return s.size;
}

// ---- out of memory: give cached segments back -----------------------------------------------

bool CachingAllocator::release_available_cached_blocks(Pool pool, int64_t size) {
  const int64_t max_split = options_.max_split_size_bytes;
  if (max_split == 0) return false;
  // PyTorch would cudaFree an expandable block here (and trip an assertion); under expandable
  // segments only release_cached_blocks returns memory in this model.
  if (options_.expandable_segments) return false;
  std::set<FreeKey>& cache = free_[pool];
  const int64_t key = std::max(size, max_split);
  auto it = cache.lower_bound(
      {key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int32_t>::min()});
  if (it != cache.end()) {
    release_block(std::get<2>(*it));
    return true;
  }
  // No single block is large enough: free oversize blocks, largest first.
  if (it == cache.begin()) return false;
  int64_t released = 0;
  --it;
  while (released < key && std::get<0>(*it) >= max_split) {
    auto cur = it;
    released += std::get<0>(*cur);
    bool first = it == cache.begin();
    if (!first) --it;
    release_block(std::get<2>(*cur));
    if (first) break;
  }
  return released >= key;
}

void CachingAllocator::release_block(int32_t block) {
  Block& b = blk(block);
  HEADROOM_CHECK(!b.allocated && b.prev < 0 && b.next < 0 && b.mapped,
                 "only a whole cached segment can be returned with cudaFree");
  Segment& seg = segments_[static_cast<size_t>(b.segment)];
  HEADROOM_CHECK(!seg.expandable, "cudaFree of an expandable segment");
  erase_free(block);
  stats_.reserved_bytes -= b.size;
  stats_.segments -= 1;
  stats_.device_frees += 1;
  seg.alive = false;
  delete_block(block);
}

void CachingAllocator::release_cached_blocks() {
  for (Pool pool : {kLarge, kSmall}) {  // PyTorch releases the large pool first
    std::vector<int32_t> whole, to_unmap;
    for (const FreeKey& k : free_[pool]) {
      int32_t b = std::get<2>(k);
      if (segments_[static_cast<size_t>(blk(b).segment)].expandable) {
        to_unmap.push_back(b);
      } else if (blk(b).prev < 0 && blk(b).next < 0) {
        whole.push_back(b);
      }
    }
    for (int32_t b : whole) release_block(b);
    for (int32_t b : to_unmap) {
      unmap_block(b);
      const Block& ub = blk(b);
      if (!ub.mapped && ub.prev < 0 && ub.next < 0) {
        // The whole address range is unmapped and free: drop the expandable segment.
        Segment& seg = segments_[static_cast<size_t>(ub.segment)];
        HEADROOM_CHECK(ub.size == seg.size, "unmapped block disagrees with its segment");
        unmapped_[pool].erase({ub.addr, b});
        seg.alive = false;
        stats_.segments -= 1;
        delete_block(b);
      }
    }
  }
}

void CachingAllocator::empty_cache() { release_cached_blocks(); }

// ---- expandable segments --------------------------------------------------------------------

int64_t CachingAllocator::page_size(Pool pool) const {
  return pool == kSmall ? kSmallBuffer : kLargeBuffer;
}

int64_t CachingAllocator::expandable_size(int32_t block) const {
  const Block& b = blk(block);
  if (!segments_[static_cast<size_t>(b.segment)].expandable) return b.size;
  return b.size + (b.next >= 0 && !blk(b.next).mapped ? blk(b.next).size : 0);
}

int32_t CachingAllocator::find_expandable_block(Pool pool, int64_t size) {
  auto allocatable = [&](int32_t b) { return b >= 0 && !blk(b).allocated; };
  auto has_room = [&](int32_t b) {
    int64_t bytes = 0;
    while (bytes < size && allocatable(b)) {
      bytes += blk(b).size;
      b = blk(b).next;
    }
    return bytes >= size;
  };
  // The lowest-address unmapped range (with the free mapped block just before it) with room.
  for (const auto& [addr, u] : unmapped_[pool]) {
    int32_t c = u;
    if (allocatable(blk(c).prev)) c = blk(c).prev;
    if (has_room(c)) return c;
  }
  const int64_t page = page_size(pool);
  int64_t space = options_.capacity_bytes == 0
                      ? kUnlimitedAddressSpace
                      : options_.capacity_bytes + options_.capacity_bytes / 8;
  space = align_up(std::max(space, size), page);
  Segment seg;
  seg.pool = pool;
  seg.expandable = true;
  seg.alive = true;
  seg.base = align_up(next_address_, page);
  seg.size = space;
  next_address_ = seg.base + space + page;
  segments_.push_back(seg);
  stats_.segments += 1;
  note_reserved_change();
  Block b;
  b.addr = seg.base;
  b.size = space;
  b.mapped = false;
  b.segment = static_cast<int32_t>(segments_.size()) - 1;
  int32_t c = new_block(b);
  unmapped_[pool].insert({b.addr, c});
  return c;
}

bool CachingAllocator::map_block(int32_t block, int64_t size, bool ignore_capacity) {
  Block& b = blk(block);
  HEADROOM_CHECK(!b.mapped && size <= b.size, "mapping a mapped block");
  const Pool pool = pool_of(block);
  const Segment& seg = segments_[static_cast<size_t>(b.segment)];
  const int64_t page = page_size(pool);
  HEADROOM_CHECK((b.addr - seg.base) % page == 0, "unmapped range not page aligned");
  const int64_t mapped = align_up(size, page);
  if (!ignore_capacity && !fits_capacity(mapped)) return false;  // cuMemCreate fails: map nothing
  unmapped_[pool].erase({b.addr, block});
  b.mapped = true;
  if (mapped < b.size) {
    Block rest;
    rest.addr = b.addr + mapped;
    rest.size = b.size - mapped;
    rest.mapped = false;
    rest.segment = b.segment;
    rest.prev = block;
    rest.next = b.next;
    int32_t r = new_block(rest);  // may reallocate blocks_: do not use `b` below
    if (blk(r).next >= 0) blk(blk(r).next).prev = r;
    blk(block).next = r;
    blk(block).size = mapped;
    unmapped_[pool].insert({blk(r).addr, r});
  }
  try_merge(block, blk(block).prev);
  try_merge(block, blk(block).next);
  insert_free(block);
  stats_.reserved_bytes += mapped;
  stats_.device_allocs += 1;
  return true;
}

int32_t CachingAllocator::try_allocate_expandable_block(Pool pool, int64_t size,
                                                        bool ignore_capacity) {
  int32_t c = find_expandable_block(pool, size);
  if (!blk(c).mapped && !map_block(c, std::min(blk(c).size, size), ignore_capacity)) return -1;
  while (blk(c).size < size) {
    // c is free and mapped, followed by an unmapped range: map part of it and merge.
    int32_t next = blk(c).next;
    const int64_t remaining = size - blk(c).size;
    if (!map_block(next, std::min(remaining, blk(next).size), ignore_capacity)) return -1;
    c = next;  // map_block merged c into next
  }
  erase_free(c);
  return c;
}

void CachingAllocator::unmap_block(int32_t block) {
  const Pool pool = pool_of(block);
  const int64_t page = page_size(pool);
  const int64_t base = segments_[static_cast<size_t>(blk(block).segment)].base;
  const int64_t begin = base + align_up(blk(block).addr - base, page);
  const int64_t end = base + align_down(blk(block).addr + blk(block).size - base, page);
  if (begin >= end) return;  // no whole page inside this free block
  erase_free(block);
  const int64_t before = begin - blk(block).addr;
  const int64_t after = blk(block).addr + blk(block).size - end;
  if (before > 0) {
    Block b;
    b.addr = blk(block).addr;
    b.size = before;
    b.segment = blk(block).segment;
    b.prev = blk(block).prev;
    b.next = block;
    int32_t i = new_block(b);
    if (blk(i).prev >= 0) blk(blk(i).prev).next = i;
    blk(block).prev = i;
    insert_free(i);
  }
  if (after > 0) {
    Block b;
    b.addr = end;
    b.size = after;
    b.segment = blk(block).segment;
    b.prev = block;
    b.next = blk(block).next;
    int32_t i = new_block(b);
    if (blk(i).next >= 0) blk(blk(i).next).prev = i;
    blk(block).next = i;
    insert_free(i);
  }
  blk(block).addr = begin;
  blk(block).size = end - begin;
  blk(block).mapped = false;
  try_merge(block, blk(block).prev);
  try_merge(block, blk(block).next);
  unmapped_[pool].insert({blk(block).addr, block});
  stats_.reserved_bytes -= end - begin;
  stats_.device_frees += 1;
}

// ---- inspection -----------------------------------------------------------------------------

std::vector<CachingAllocatorBlock> CachingAllocator::live_blocks() const {
  std::vector<CachingAllocatorBlock> out;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (!b.in_use || !b.allocated) continue;
    out.push_back(
        {b.owner, b.addr, b.size, b.requested, pool_of(static_cast<int32_t>(i)) == kSmall});
  }
  std::sort(out.begin(), out.end(),
            [](const CachingAllocatorBlock& a, const CachingAllocatorBlock& b) {
              return a.address < b.address;
            });
  return out;
}

std::string CachingAllocator::check_invariants() const {
  std::map<int32_t, std::vector<int32_t>> heads;  // segment -> blocks without prev
  int64_t allocated = 0, reserved = 0;
  size_t cached = 0, unmapped = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (!b.in_use) continue;
    const int32_t bi = static_cast<int32_t>(i);
    if (b.segment < 0 || !segments_[static_cast<size_t>(b.segment)].alive) {
      return fmt::format("block {} belongs to no live segment", i);
    }
    if (b.prev < 0) heads[b.segment].push_back(bi);
    if (b.allocated) allocated += b.size;
    if (!b.allocated && b.mapped) {
      ++cached;
      if (!free_[pool_of(bi)].count({b.size, b.addr, bi})) {
        return fmt::format("free block {} is not cached", i);
      }
    }
    if (!b.mapped) {
      ++unmapped;
      if (b.allocated) return fmt::format("unmapped block {} is allocated", i);
      if (!unmapped_[pool_of(bi)].count({b.addr, bi}))
        return fmt::format("unmapped block {} lost", i);
    }
    if (b.mapped && segments_[static_cast<size_t>(b.segment)].expandable) reserved += b.size;
    if (b.next >= 0 && (blk(b.next).prev != bi || blk(b.next).addr != b.addr + b.size)) {
      return fmt::format("blocks {} and {} are not adjacent neighbours", i, b.next);
    }
    if (b.next >= 0 && !b.allocated && !blk(b.next).allocated && b.mapped == blk(b.next).mapped) {
      return fmt::format("free neighbours {} and {} were not merged", i, b.next);
    }
  }
  if (cached != free_[0].size() + free_[1].size()) return "cache holds blocks that do not exist";
  if (unmapped != unmapped_[0].size() + unmapped_[1].size()) return "stale unmapped ranges";
  int32_t live_segments = 0;
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    if (!seg.alive) continue;
    ++live_segments;
    if (!seg.expandable) reserved += seg.size;
    auto h = heads.find(static_cast<int32_t>(s));
    if (h == heads.end() || h->second.size() != 1) {
      return fmt::format("segment {} does not have exactly one first block", s);
    }
    int64_t at = seg.base;
    for (int32_t b = h->second[0]; b >= 0; b = blk(b).next) {
      if (blk(b).addr != at) return fmt::format("segment {} has a gap or overlap at {}", s, at);
      at += blk(b).size;
    }
    if (at != seg.base + seg.size) return fmt::format("segment {} blocks do not cover it", s);
  }
  if (live_segments != stats_.segments) return "segment count drifted";
  if (allocated != stats_.allocated_bytes) return "allocated bytes drifted";
  if (reserved != stats_.reserved_bytes) {
    return fmt::format("reserved bytes drifted: blocks say {}, stats say {}", reserved,
                       stats_.reserved_bytes);
  }
  if (stats_.allocated_bytes > stats_.reserved_bytes) return "allocated exceeds reserved";
  return "";
}

}  // namespace headroom
