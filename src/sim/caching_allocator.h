// PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, class
// DeviceCachingAllocator) as a HeapAlgorithm: replays Alloc/Free and reports what the allocator
// would reserve from the device (what nvidia-smi shows, less the CUDA context).
//
// Rules modelled, read from PyTorch 2.x (the 2.4-2.8 file; PyTorch 1.13 differs where noted):
//  1. round_size: requests < 512 B become 512 B, others are rounded up to a multiple of 512 B.
//     (roundup_power2_divisions is NOT modelled: it is off by default.)
//  2. Pools: a rounded size <= 1 MiB (kSmallSize) goes to the small pool, larger to the large pool.
//  3. get_allocation_size: a new small-pool segment is 2 MiB (kSmallBuffer); a large request
//     < 10 MiB (kMinLargeAlloc) gets a 20 MiB segment (kLargeBuffer); larger requests get their
//     size rounded up to 2 MiB (kRoundLarge).
//  4. get_free_block: best fit among the pool's cached free blocks, ordered by (size, address);
//  only
//     the smallest block that fits is examined. With max_split_size set, a request below it never
//     takes a block at or above it, and a request at or above it only takes a block smaller than
//     request + max_non_split_rounding (20 MiB by default).
//  5. should_split: small pool (and every block under expandable segments) splits when the
//     remainder is >= 512 B; the large pool splits when the request is < max_split_size and the
//     remainder is > 1 MiB. An unsplit block is handed out whole: "allocated" counts block sizes.
//  6. free: the block merges with free neighbours of its own segment and goes back to the cache;
//     segments are never returned to the device on free.
//  7. When a new segment would exceed capacity_bytes (cudaMalloc fails): release_available_cached_
//     blocks (only with max_split_size set: free the smallest cached oversize block that covers the
//     request, else the largest oversize blocks until enough), retry; then release_cached_blocks
//     (cudaFree every cached block that is a whole segment), retry; then out of memory.
//  8. expandable_segments (PyTorch >= 2.1): one growing segment per pool; physical pages are
//     mapped on demand, 2 MiB pages for the small pool and 20 MiB pages for the large pool
//     (ExpandableSegment's segment_size is kSmallBuffer / kLargeBuffer, not 2 MiB for both); a
//     request maps only the pages it needs at the lowest address with room; on OOM the fully free
//     pages of free blocks are unmapped. Reserved = mapped bytes.
// PyTorch 1.13 differences: no expandable segments; max_non_split_rounding is the fixed
// kLargeBuffer (the option arrived in 2.5); roundup_power2_divisions took one value and there was a
// roundup_bypass_threshold_mb; the rest (constants, best fit, split, release-and-retry) is the
// same.
//
// Not modelled: streams (one stream; blocks are never used on another stream, so no events),
// CUDA graph private pools, garbage_collection_threshold / set_per_process_memory_fraction,
// free-memory callbacks, roundup_power2_divisions, real cudaMalloc addresses (segments get
// increasing synthetic addresses that are never reused, which decides best-fit ties).
//
// Invariants (check_invariants): the blocks of each segment tile it without gaps or overlap; no two
// neighbouring free blocks of the same mapping state stay unmerged; reserved = sum of cudaMalloc'd
// segments + mapped bytes; allocated = sum of allocated block sizes.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/heap_algorithm.h"

namespace headroom {

namespace cuda_caching {
inline constexpr int64_t kMinBlockSize = 512;          // every size is a multiple of this
inline constexpr int64_t kSmallSize = 1LL << 20;       // largest small-pool request: 1 MiB
inline constexpr int64_t kSmallBuffer = 2LL << 20;     // small-pool segment: 2 MiB
inline constexpr int64_t kLargeBuffer = 20LL << 20;    // segment for 1-10 MiB requests: 20 MiB
inline constexpr int64_t kMinLargeAlloc = 10LL << 20;  // below this, large requests share 20 MiB
inline constexpr int64_t kRoundLarge = 2LL << 20;      // larger segments round up to 2 MiB

// round_size: the bytes a request really occupies.
int64_t round_size(int64_t bytes);
// get_allocation_size: the segment cudaMalloc'd for a rounded request that found no cached block.
int64_t allocation_size(int64_t rounded);
}  // namespace cuda_caching

struct CachingAllocatorOptions {
  // Bytes the allocator may reserve (device memory less CUDA context and anything else resident);
  // a segment that would take reserved past it fails like cudaMalloc. 0 = unlimited.
  int64_t capacity_bytes = 0;
  // PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb, in bytes. 0 = unlimited (PyTorch's default).
  // PyTorch rejects values below 20 MiB; so does this model (InputError).
  int64_t max_split_size_bytes = 0;
  // max_non_split_rounding_mb (PyTorch >= 2.5), in bytes: a request >= max_split_size may take a
  // cached block only if block < request + this. 1.13-2.4 hard-code kLargeBuffer (20 MiB).
  int64_t max_non_split_rounding_bytes = cuda_caching::kLargeBuffer;
  // expandable_segments:True (PyTorch >= 2.1).
  bool expandable_segments = false;
};

struct CachingAllocatorStats {
  int64_t reserved_bytes = 0;              // current: torch.cuda.memory_reserved()
  int64_t peak_reserved_bytes = 0;         // torch.cuda.max_memory_reserved()
  int64_t allocated_bytes = 0;             // current, block sizes: torch.cuda.memory_allocated()
  int64_t peak_allocated_bytes = 0;        // torch.cuda.max_memory_allocated()
  int64_t requested_bytes = 0;             // current, unrounded request sizes
  int64_t allocated_at_reserved_peak = 0;  // allocated bytes when the reserved peak was first hit
  int64_t fragmentation_at_reserved_peak = 0;  // peak_reserved - allocated_at_reserved_peak
  int32_t segments = 0;  // live device segments (cudaMalloc'd, or expandable address ranges)
  int32_t peak_segments = 0;
  int64_t device_allocs = 0;  // cudaMalloc calls (expandable: page-mapping calls), successful ones
  int64_t device_frees = 0;   // cudaFree calls (expandable: unmap calls)
  int64_t alloc_retries = 0;  // allocations that needed release_cached_blocks (num_alloc_retries)
  int32_t ooms = 0;           // allocations that failed even after releasing the cache
  bool oom = false;           // the first out-of-memory:
  BufferId oom_buffer = -1;   //   which buffer's allocation failed
  int64_t oom_request_bytes = 0;   //   its rounded size
  int64_t oom_reserved_bytes = 0;  //   reserved and allocated bytes when it failed
  int64_t oom_allocated_bytes = 0;
};

// One allocated block, for the overlap oracle.
struct CachingAllocatorBlock {
  BufferId buffer = -1;
  int64_t address = 0;
  int64_t size = 0;       // rounded (or whole unsplit block)
  int64_t requested = 0;  // the bytes asked for
  bool small_pool = false;
};

class CachingAllocator final : public HeapAlgorithm {
 public:
  // Throws InputError when an option is out of range.
  explicit CachingAllocator(CachingAllocatorOptions options = {});

  // REQUIRES: bytes >= 0; id not live. A zero-byte request takes no block (PyTorch returns a null
  // pointer without calling the allocator). An allocation that fails after release-and-retry is
  // recorded as the OOM; the model then keeps going as if capacity were unlimited, so the rest of
  // the run still says how much it would need.
  void alloc(BufferId id, int64_t bytes) override;
  // REQUIRES: id live.
  void free(BufferId id) override;
  // Reserved bytes (segments held from the device).
  int64_t footprint() const override { return stats_.reserved_bytes; }

  // torch.cuda.empty_cache(): release_cached_blocks.
  void empty_cache();

  const CachingAllocatorStats& stats() const { return stats_; }
  const CachingAllocatorOptions& options() const { return options_; }
  // Allocated blocks, ordered by address.
  std::vector<CachingAllocatorBlock> live_blocks() const;
  // "" when every invariant in the header comment holds, else the first violation.
  std::string check_invariants() const;

 private:
  enum Pool : int { kSmall = 0, kLarge = 1 };
  struct Block {
    int64_t addr = 0;
    int64_t size = 0;
    int64_t requested = 0;
    int32_t prev = -1;  // neighbours inside the same segment
    int32_t next = -1;
    int32_t segment = -1;
    BufferId owner = -1;
    bool allocated = false;
    bool mapped = true;   // false only for unmapped ranges of expandable segments
    bool in_use = false;  // slot holds a block
  };
  struct Segment {
    Pool pool = kLarge;
    bool expandable = false;
    bool alive = false;
    int64_t base = 0;
    int64_t size = 0;  // cudaMalloc size, or the reserved address range when expandable
  };
  using FreeKey = std::tuple<int64_t, int64_t, int32_t>;  // (size, address, block)

  int32_t new_block(const Block& b);
  void delete_block(int32_t i);
  Pool pool_of(int32_t block) const {
    return segments_[static_cast<size_t>(blocks_[static_cast<size_t>(block)].segment)].pool;
  }
  Block& blk(int32_t i) { return blocks_[static_cast<size_t>(i)]; }
  const Block& blk(int32_t i) const { return blocks_[static_cast<size_t>(i)]; }
  void insert_free(int32_t i);
  void erase_free(int32_t i);

  int32_t get_free_block(Pool pool, int64_t size);
  int32_t alloc_block(Pool pool, int64_t size, int64_t alloc_size, bool is_retry,
                      bool ignore_capacity);
  bool should_split(int32_t block, int64_t size) const;
  int32_t split(int32_t block, int64_t size);
  void free_block(int32_t block);
  int64_t try_merge(int32_t dst, int32_t src);
  bool release_available_cached_blocks(Pool pool, int64_t size);
  void release_cached_blocks();
  void release_block(int32_t block);
  // Expandable segments.
  int64_t page_size(Pool pool) const;
  int64_t expandable_size(int32_t block) const;
  int32_t find_expandable_block(Pool pool, int64_t size);
  bool map_block(int32_t block, int64_t size, bool ignore_capacity);
  int32_t try_allocate_expandable_block(Pool pool, int64_t size, bool ignore_capacity);
  void unmap_block(int32_t block);
  bool fits_capacity(int64_t more) const;
  void note_reserved_change();

  CachingAllocatorOptions options_;
  CachingAllocatorStats stats_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_slots_;
  std::vector<Segment> segments_;
  std::set<FreeKey> free_[2];  // cached (mapped, unallocated) blocks per pool
  std::set<std::pair<int64_t, int32_t>> unmapped_[2];  // (address, block) of unmapped ranges
  std::vector<int32_t> buffer_block_;                  // BufferId -> block, -1 = none
  int64_t next_address_ = 1LL << 32;
};

}  // namespace headroom
