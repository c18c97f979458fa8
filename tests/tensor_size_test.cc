// Tensor::numel and Tensor::bytes: the products, and the overflow error each names (the message
// is built only when a product overflows, as these run at every interpreter step).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ir/graph.h"
#include "util/error.h"

namespace headroom {
namespace {
namespace HEADROOM_UNITY_ID {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TensorSize, ElementsAndBytes) {
  Tensor t;
  t.name = "x";
  t.shape = {2, 3, 4};
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 96);  // 24 fp32 elements x 4 bytes
  t.shape = {};
  EXPECT_EQ(t.numel(), 1);   // a scalar
  EXPECT_EQ(t.bytes(), 4);
}

TEST(TensorSize, OverflowNamesTheTensorAndTheProduct) {
  Tensor t;
  t.name = "x";
  t.shape = {int64_t{1} << 40, int64_t{1} << 40};  // 2^80 elements
  EXPECT_EQ(error_of([&] { (void)t.numel(); }),
            "size overflows 64 bits while computing the element count of tensor 'x' "
            "(1099511627776 x 1099511627776)");
  t.shape = {int64_t{1} << 62};  // 2^62 elements fit, 2^64 bytes do not
  EXPECT_EQ(t.numel(), int64_t{1} << 62);
  EXPECT_EQ(error_of([&] { (void)t.bytes(); }),
            "size overflows 64 bits while computing the bytes of tensor 'x' (4611686018427387904 x 4)");
}

}  // namespace HEADROOM_UNITY_ID
}  // namespace
}  // namespace headroom
