// mlp:layers=N,dim=D — N blocks of nn.Linear(D, D) followed by nn.GELU(), in an nn.Sequential.
// Input [B, D] float; default loss MSE against a float target shaped like the output.
#include "frontends/zoo/losses.h"
#include "frontends/zoo/registry.h"

namespace headroom {
namespace {

Graph build_mlp(const ModelSpec& spec, const BuildConfig& cfg) {
  SpecReader r(spec);
  int64_t layers = r.get_int("layers", 16);
  int64_t dim = r.get_int("dim", 1024);
  r.reject_unused();
  GraphBuilder b(spec.name, cfg.dtype);
  b.set_dim("batch", cfg.batch);
  TensorId x = b.input("input", {cfg.batch, dim}, cfg.dtype);
  for (int64_t i = 0; i < layers; ++i) {
    x = b.linear(std::to_string(2 * i), x, dim);
    x = b.gelu(std::to_string(2 * i + 1), x);
  }
  b.mark_output(x);
  b.begin_loss();
  b.set_loss(add_loss(b, x, LossKind::Mse, cfg));
  return b.finish();
}

}  // namespace

void register_mlp(std::vector<ZooEntry>& out) {
  out.push_back({"mlp", "N x (Linear(D, D) + GELU); params layers=16, dim=1024", "mlp", false, build_mlp});
}

}  // namespace headroom
