// The data plane's row copies (kernels/layout/row_copy.h): the CPU references
// against hand-computed layouts, and the CUDA launchers against the CPU
// references (skipped visibly without a GPU, built only with CUDA).
#include "kernels/layout/row_copy.h"

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/workload/random.h"

#if defined(SPECVERIFY_TEST_CUDA)
#include <cuda_runtime_api.h>

#include "kernels/common/cuda_status.h"
#include "kernels/layout/row_copy_cuda.h"
#endif

namespace specverify {
namespace {

// A ragged batch whose sequence i has gamma[i] rows of `row_bytes`, each in
// its own "region" buffer, every byte a function of (sequence, row, byte).
struct Scattered {
  std::vector<int32_t> offsets;
  std::vector<std::vector<std::byte>> sources;
  int64_t row_bytes;
  std::byte Byte(int32_t seq, int64_t row, int64_t k) const {
    return static_cast<std::byte>((seq * 131 + row * 17 + k * 7) & 0xFF);
  }
};

Scattered MakeScattered(const std::vector<int32_t>& gammas, int64_t row_bytes) {
  Scattered s;
  s.row_bytes = row_bytes;
  s.offsets.push_back(0);
  for (size_t i = 0; i < gammas.size(); ++i) {
    s.offsets.push_back(s.offsets.back() + gammas[i]);
    std::vector<std::byte> rows(static_cast<size_t>(gammas[i] * row_bytes) + 1);  // +1: odd start
    for (int64_t r = 0; r < gammas[i]; ++r) {
      for (int64_t k = 0; k < row_bytes; ++k) {
        rows[1 + r * row_bytes + k] = s.Byte(static_cast<int32_t>(i), r, k);
      }
    }
    s.sources.push_back(std::move(rows));
  }
  return s;
}

TEST(RowCopyReferenceTest, GatherLaysEverySequencesRowsAtItsOffset) {
  const Scattered s = MakeScattered({3, 1, 4, 2}, 24);
  std::vector<const std::byte*> sources;
  for (const auto& v : s.sources) sources.push_back(v.data() + 1);  // unaligned on purpose
  std::vector<std::byte> rows(static_cast<size_t>(s.offsets.back() * s.row_bytes), std::byte{0xEE});
  RowGatherParams p;
  p.num_sequences = 4;
  p.total_rows = s.offsets.back();
  p.max_rows = 4;
  p.row_bytes = s.row_bytes;
  p.draft_offsets = s.offsets.data();
  p.sources = sources.data();
  p.rows = rows.data();
  ASSERT_TRUE(ValidateRowGather(p).ok());
  ReferenceRowGather(p);
  for (int32_t i = 0; i < 4; ++i) {
    for (int64_t r = 0; r < s.offsets[i + 1] - s.offsets[i]; ++r) {
      for (int64_t k = 0; k < s.row_bytes; ++k) {
        ASSERT_EQ(rows[(s.offsets[i] + r) * s.row_bytes + k], s.Byte(i, r, k))
            << "sequence " << i << " row " << r << " byte " << k;
      }
    }
  }
}

TEST(RowCopyReferenceTest, GatherWithDestinationsWritesEachSequenceWhereItsTableSays) {
  // The host-decided greedy path's use: sequence i copies offsets[i+1] -
  // offsets[i] rows (its accepted rows) to destinations[i], none when that is
  // null; nothing else of any destination buffer changes.
  const Scattered s = MakeScattered({3, 1, 4, 2}, 12);
  const std::vector<int32_t> accepted_offsets = {0, 2, 2, 6, 7};  // k = 2, 0, 4, 1
  std::vector<const std::byte*> sources;
  for (const auto& v : s.sources) sources.push_back(v.data() + 1);
  std::vector<std::vector<std::byte>> outputs(4, std::vector<std::byte>(6 * 12, std::byte{0xEE}));
  const int64_t at[] = {12, 0, 0, 24};  // bytes into each output
  std::vector<std::byte*> destinations;
  for (int i = 0; i < 4; ++i) destinations.push_back(outputs[i].data() + at[i]);
  destinations[2] = nullptr;  // skipped: its output must stay as it was
  RowGatherParams p;
  p.num_sequences = 4;
  p.total_rows = 7;
  p.max_rows = 4;
  p.row_bytes = s.row_bytes;
  p.draft_offsets = accepted_offsets.data();
  p.sources = sources.data();
  p.destinations = destinations.data();
  ASSERT_TRUE(ValidateRowGather(p).ok());
  ReferenceRowGather(p);
  for (int32_t i = 0; i < 4; ++i) {
    const int64_t rows = i == 2 ? 0 : accepted_offsets[i + 1] - accepted_offsets[i];
    for (int64_t b = 0; b < static_cast<int64_t>(outputs[i].size()); ++b) {
      const int64_t rel = b - at[i];
      const std::byte expected = rel >= 0 && rel < rows * s.row_bytes
                                     ? s.Byte(i, rel / s.row_bytes, rel % s.row_bytes)
                                     : std::byte{0xEE};
      ASSERT_EQ(outputs[i][b], expected) << "sequence " << i << " byte " << b;
    }
  }
}

TEST(RowCopyReferenceTest, DeliveryCopiesEachRequestsPackedRowsAndNothingMore) {
  constexpr int64_t kRowBytes = 8;
  // 5 sequences, packed rows (k) 2, 0, 3, 1, 0; requests {0,1}, {2}, {3,4}.
  const std::vector<int32_t> packed_offsets = {0, 2, 2, 5, 6, 6};
  std::vector<std::byte> packed(6 * kRowBytes);
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<std::byte>(i + 1);
  std::vector<std::vector<std::byte>> outputs(3, std::vector<std::byte>(4 * kRowBytes, std::byte{0}));
  std::vector<PackedDelivery> deliveries(3);
  const int32_t first[] = {0, 2, 3}, count[] = {2, 1, 2};
  for (int d = 0; d < 3; ++d) {
    deliveries[d].first_sequence = first[d];
    deliveries[d].num_sequences = count[d];
    deliveries[d].max_rows = 4;
    deliveries[d].destination = outputs[d].data();
  }
  PackedDeliveryParams p;
  p.num_deliveries = 3;
  p.max_rows = 4;
  p.row_bytes = kRowBytes;
  p.deliveries = deliveries.data();
  p.packed_row_offsets = packed_offsets.data();
  p.packed_kv = packed.data();
  ASSERT_TRUE(ValidatePackedDelivery(p).ok());
  ReferencePackedDelivery(p);
  const int64_t rows_of[] = {2, 3, 1}, first_row[] = {0, 2, 5};
  for (int d = 0; d < 3; ++d) {
    for (int64_t b = 0; b < 4 * kRowBytes; ++b) {
      const std::byte expected = b < rows_of[d] * kRowBytes
                                     ? packed[first_row[d] * kRowBytes + b]
                                     : std::byte{0};  // past the packed rows: untouched
      ASSERT_EQ(outputs[d][b], expected) << "delivery " << d << " byte " << b;
    }
  }
}

TEST(RowCopyReferenceTest, AcceptedCopyPlacesEachSequenceAfterTheEarlierOnesOfItsGroup) {
  // A sampled batch's use: the k's are known only where the copy runs.
  // Sequences 0 and 1 go to the packed buffer (origin 0), 2 and 3 to one
  // request's output (origin 2), 4 nowhere (a null destination).
  const Scattered s = MakeScattered({3, 1, 4, 2, 2}, 10);
  const std::vector<int32_t> accepted = {2, 1, 3, 2, 2};
  std::vector<const std::byte*> sources;
  for (const auto& v : s.sources) sources.push_back(v.data() + 1);
  std::vector<std::byte> packed(8 * 10, std::byte{0xEE}), output(8 * 10, std::byte{0xEE});
  std::vector<std::byte*> destinations = {packed.data(), packed.data(), output.data(),
                                          output.data(), nullptr};
  const std::vector<int32_t> origins = {0, 0, 2, 2, 4};
  AcceptedRowCopyParams p;
  p.num_sequences = 5;
  p.max_rows = 4;
  p.row_bytes = s.row_bytes;
  p.accepted_lengths = accepted.data();
  p.sources = sources.data();
  p.destinations = destinations.data();
  p.origins = origins.data();
  ASSERT_TRUE(ValidateAcceptedRowCopy(p).ok());
  ReferenceAcceptedRowCopy(p);
  // (sequence, row) of each row of the two buffers; -1: untouched.
  const int32_t packed_rows[][2] = {{0, 0}, {0, 1}, {1, 0}, {-1, 0}};
  const int32_t output_rows[][2] = {{2, 0}, {2, 1}, {2, 2}, {3, 0}, {3, 1}, {-1, 0}};
  const auto expect = [&](const std::vector<std::byte>& buffer, const int32_t (*rows)[2], int n,
                          const char* name) {
    for (int r = 0; r < n; ++r) {
      for (int64_t k = 0; k < s.row_bytes; ++k) {
        const std::byte want = rows[r][0] < 0 ? std::byte{0xEE} : s.Byte(rows[r][0], rows[r][1], k);
        ASSERT_EQ(buffer[r * s.row_bytes + k], want) << name << " row " << r << " byte " << k;
      }
    }
  };
  expect(packed, packed_rows, 4, "packed");
  expect(output, output_rows, 6, "output");
}

TEST(RowCopyReferenceTest, ValidationNamesWhatIsMissing) {
  RowGatherParams g;
  g.num_sequences = 1;
  g.row_bytes = 0;
  EXPECT_FALSE(ValidateRowGather(g).ok());
  g.row_bytes = 4;
  EXPECT_FALSE(ValidateRowGather(g).ok());  // pointers unset
  const int32_t offsets[] = {0, 1};
  const std::byte* source = nullptr;
  g.draft_offsets = offsets;
  g.sources = &source;
  EXPECT_FALSE(ValidateRowGather(g).ok());  // neither rows nor destinations
  std::byte* destination = nullptr;
  g.destinations = &destination;
  EXPECT_TRUE(ValidateRowGather(g).ok());
  PackedDeliveryParams d;
  d.num_deliveries = 1;
  d.row_bytes = 4;
  EXPECT_FALSE(ValidatePackedDelivery(d).ok());
  AcceptedRowCopyParams a;
  a.num_sequences = 1;
  a.row_bytes = 0;
  EXPECT_FALSE(ValidateAcceptedRowCopy(a).ok());
  a.row_bytes = 4;
  const int32_t k[] = {1};
  a.accepted_lengths = k;
  a.sources = &source;
  a.destinations = &destination;
  EXPECT_FALSE(ValidateAcceptedRowCopy(a).ok());  // origins unset
  const int32_t origin[] = {0};
  a.origins = origin;
  EXPECT_TRUE(ValidateAcceptedRowCopy(a).ok());
}

#if defined(SPECVERIFY_TEST_CUDA)

class RowCopyCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible: GPU parity tests skipped";
  }
  template <typename T>
  T* Device(const T* host, size_t count) {
    void* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(count, 1) * sizeof(T)), cudaSuccess);
    if (host != nullptr && count > 0) {
      EXPECT_EQ(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    owned_.push_back(d);
    return static_cast<T*>(d);
  }
  void TearDown() override {
    for (void* p : owned_) cudaFree(p);
  }
  std::vector<void*> owned_;
};

// Ragged batches with row sizes of every alignment: the device gather, then
// the device delivery of a simulated pack, equal the CPU references.
TEST_F(RowCopyCudaTest, GatherAndDeliveryMatchTheReferences) {
  for (int64_t row_bytes : {1, 6, 16, 100, 4096}) {
    SplitMix64 rng(static_cast<uint64_t>(row_bytes));
    std::vector<int32_t> gammas(37);
    for (int32_t& g : gammas) g = 1 + static_cast<int32_t>(rng.NextBelow(12));
    const Scattered s = MakeScattered(gammas, row_bytes);
    const int64_t total = s.offsets.back();
    std::vector<const std::byte*> host_sources, device_sources;
    for (const auto& v : s.sources) {
      host_sources.push_back(v.data() + 1);
      device_sources.push_back(Device(v.data(), v.size()) + 1);
    }
    std::vector<std::byte> expected(static_cast<size_t>(total * row_bytes));
    RowGatherParams p;
    p.num_sequences = static_cast<int32_t>(gammas.size());
    p.total_rows = total;
    p.max_rows = 12;
    p.row_bytes = row_bytes;
    p.draft_offsets = s.offsets.data();
    p.sources = host_sources.data();
    p.rows = expected.data();
    ReferenceRowGather(p);
    p.draft_offsets = Device(s.offsets.data(), s.offsets.size());
    p.sources = Device(device_sources.data(), device_sources.size());
    p.rows = Device<std::byte>(nullptr, expected.size());
    ASSERT_EQ(LaunchRowGather(p, nullptr), cudaSuccess);
    std::vector<std::byte> gathered(expected.size());
    ASSERT_EQ(cudaMemcpy(gathered.data(), p.rows, gathered.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(gathered, expected) << "gather, row_bytes " << row_bytes;

    // Delivery: requests of 1-3 sequences, k_i <= gamma_i, the gathered rows
    // as the packed buffer.
    std::vector<int32_t> packed_offsets = {0};
    for (int32_t g : gammas) {
      packed_offsets.push_back(packed_offsets.back() + static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(g) + 1)));
    }
    std::vector<PackedDelivery> host_d, dev_d;
    std::vector<std::vector<std::byte>> host_out;
    std::vector<std::byte*> dev_out;
    for (int32_t first = 0; first < p.num_sequences;) {
      const int32_t n = std::min<int32_t>(p.num_sequences - first,
                                          1 + static_cast<int32_t>(rng.NextBelow(3)));
      const int32_t max_rows = s.offsets[first + n] - s.offsets[first];
      host_out.emplace_back(static_cast<size_t>(max_rows * row_bytes), std::byte{0x5A});
      dev_out.push_back(Device(host_out.back().data(), host_out.back().size()));
      PackedDelivery d{first, n, max_rows, 0, nullptr};
      host_d.push_back(d);
      dev_d.push_back(d);
      first += n;
    }
    for (size_t i = 0; i < host_d.size(); ++i) {
      host_d[i].destination = host_out[i].data();
      dev_d[i].destination = dev_out[i];
    }
    PackedDeliveryParams q;
    q.num_deliveries = static_cast<int32_t>(host_d.size());
    q.max_rows = 36;
    q.row_bytes = row_bytes;
    q.deliveries = host_d.data();
    q.packed_row_offsets = packed_offsets.data();
    q.packed_kv = expected.data();
    ReferencePackedDelivery(q);
    q.deliveries = Device(dev_d.data(), dev_d.size());
    q.packed_row_offsets = Device(packed_offsets.data(), packed_offsets.size());
    q.packed_kv = p.rows;
    ASSERT_EQ(LaunchPackedDelivery(q, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (size_t i = 0; i < host_d.size(); ++i) {
      std::vector<std::byte> got(host_out[i].size());
      ASSERT_EQ(cudaMemcpy(got.data(), dev_out[i], got.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(got, host_out[i]) << "delivery " << i << ", row_bytes " << row_bytes;
    }
  }
}

// The gather with a destination per sequence (the host-decided greedy path's
// KV_RETURN_REGION copy), some of them null (skipped): every destination
// buffer equals the reference's, including the bytes it must leave alone.
TEST_F(RowCopyCudaTest, GatherToPerSequenceDestinationsMatchesTheReference) {
  for (int64_t row_bytes : {1, 6, 16, 100, 4096}) {
    SplitMix64 rng(static_cast<uint64_t>(row_bytes) + 99);
    std::vector<int32_t> gammas(29);
    for (int32_t& g : gammas) g = 1 + static_cast<int32_t>(rng.NextBelow(12));
    const Scattered s = MakeScattered(gammas, row_bytes);
    std::vector<int32_t> accepted_offsets = {0};
    int32_t max_rows = 0;
    for (int32_t g : gammas) {
      const int32_t k = static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(g) + 1));
      accepted_offsets.push_back(accepted_offsets.back() + k);
      max_rows = std::max(max_rows, k);
    }
    std::vector<const std::byte*> host_sources, device_sources;
    std::vector<std::vector<std::byte>> host_out;
    std::vector<std::byte*> host_dst, device_dst, device_out;
    for (size_t i = 0; i < gammas.size(); ++i) {
      host_sources.push_back(s.sources[i].data() + 1);
      device_sources.push_back(Device(s.sources[i].data(), s.sources[i].size()) + 1);
      // Room for gamma rows plus one odd byte in front of the destination.
      host_out.emplace_back(static_cast<size_t>(gammas[i] * row_bytes) + 1, std::byte{0x5A});
      std::byte* d = Device(host_out.back().data(), host_out.back().size());
      const bool skipped = i % 5 == 3;  // a null destination: nothing copied
      host_dst.push_back(skipped ? nullptr : host_out.back().data() + 1);
      device_dst.push_back(skipped ? nullptr : d + 1);
      device_out.push_back(d);
    }
    RowGatherParams p;
    p.num_sequences = static_cast<int32_t>(gammas.size());
    p.total_rows = accepted_offsets.back();
    p.max_rows = max_rows;
    p.row_bytes = row_bytes;
    p.draft_offsets = accepted_offsets.data();
    p.sources = host_sources.data();
    p.destinations = host_dst.data();
    ReferenceRowGather(p);
    p.draft_offsets = Device(accepted_offsets.data(), accepted_offsets.size());
    p.sources = Device(device_sources.data(), device_sources.size());
    p.destinations = Device(device_dst.data(), device_dst.size());
    ASSERT_EQ(LaunchRowGather(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (size_t i = 0; i < gammas.size(); ++i) {
      std::vector<std::byte> got(host_out[i].size());
      ASSERT_EQ(cudaMemcpy(got.data(), device_out[i], got.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(got, host_out[i]) << "sequence " << i << ", row_bytes " << row_bytes;
    }
  }
}

// The copy with the k's on the device (a sampled batch's KV rows), over more
// sequences than a block has threads (the rows before a sequence are summed
// in strides) and groups of 1-40 sequences, some of them skipped: every
// destination buffer equals the reference's, including the bytes it must
// leave alone.
TEST_F(RowCopyCudaTest, AcceptedCopyMatchesTheReference) {
  for (int64_t row_bytes : {1, 6, 16, 100, 4096}) {
    SplitMix64 rng(static_cast<uint64_t>(row_bytes) + 7);
    std::vector<int32_t> gammas(row_bytes == 4096 ? 70 : 300);
    for (int32_t& g : gammas) g = 1 + static_cast<int32_t>(rng.NextBelow(9));
    const Scattered s = MakeScattered(gammas, row_bytes);
    const int32_t b = static_cast<int32_t>(gammas.size());
    std::vector<int32_t> accepted, origins;
    std::vector<const std::byte*> host_sources, device_sources;
    std::vector<std::vector<std::byte>> host_out;
    std::vector<std::byte*> host_groups, device_groups, host_dst, device_dst;
    for (int32_t first = 0; first < b;) {
      const int32_t n = std::min<int32_t>(b - first, 1 + static_cast<int32_t>(rng.NextBelow(40)));
      const int32_t rows = s.offsets[first + n] - s.offsets[first];
      host_out.emplace_back(static_cast<size_t>(rows * row_bytes) + 1, std::byte{0x5A});
      std::byte* d = Device(host_out.back().data(), host_out.back().size());
      host_groups.push_back(d);
      const bool skipped = host_out.size() % 4 == 3;  // a null destination: nothing copied
      for (int32_t i = first; i < first + n; ++i) {
        accepted.push_back(static_cast<int32_t>(rng.NextBelow(static_cast<uint64_t>(gammas[i]) + 1)));
        origins.push_back(first);
        host_dst.push_back(skipped ? nullptr : host_out.back().data() + 1);  // odd start
        device_dst.push_back(skipped ? nullptr : d + 1);
      }
      first += n;
    }
    for (int32_t i = 0; i < b; ++i) {
      host_sources.push_back(s.sources[i].data() + 1);
      device_sources.push_back(Device(s.sources[i].data(), s.sources[i].size()) + 1);
    }
    AcceptedRowCopyParams p;
    p.num_sequences = b;
    p.max_rows = 9;
    p.row_bytes = row_bytes;
    p.accepted_lengths = accepted.data();
    p.sources = host_sources.data();
    p.destinations = host_dst.data();
    p.origins = origins.data();
    ReferenceAcceptedRowCopy(p);
    p.accepted_lengths = Device(accepted.data(), accepted.size());
    p.sources = Device(device_sources.data(), device_sources.size());
    p.destinations = Device(device_dst.data(), device_dst.size());
    p.origins = Device(origins.data(), origins.size());
    ASSERT_EQ(LaunchAcceptedRowCopy(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (size_t g = 0; g < host_out.size(); ++g) {
      std::vector<std::byte> got(host_out[g].size());
      ASSERT_EQ(cudaMemcpy(got.data(), host_groups[g], got.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(got, host_out[g]) << "group " << g << ", row_bytes " << row_bytes;
    }
  }
}

#endif  // SPECVERIFY_TEST_CUDA

}  // namespace
}  // namespace specverify
