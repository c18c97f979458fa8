#include "frontends/zoo/losses.h"

#include "util/error.h"

namespace headroom {

TensorId add_loss(GraphBuilder& b, TensorId output, LossKind fallback, const BuildConfig& config,
                  const std::string& prefix) {
  LossKind kind = config.loss == LossKind::Default ? fallback : config.loss;
  const std::vector<int64_t> s = b.shape(output);
  switch (kind) {
    case LossKind::Mse: {
      TensorId target = b.target(prefix + ".target", s, b.tensor(output).dtype);
      return b.mse_loss(prefix, output, target);
    }
    case LossKind::CrossEntropy: {
      if (s.size() == 2) {
        TensorId target = b.target(prefix + ".target", {s[0]}, DType::I64);
        return b.cross_entropy(prefix, output, target);
      }
      if (s.size() == 3) {
        // Per position: logits [B,S,V] viewed as [B*S,V] against targets [B,S].
        TensorId target = b.target(prefix + ".target", {s[0], s[1]}, DType::I64);
        TensorId flat = b.view(prefix + ".view", b.contiguous(prefix + ".contiguous", output), {s[0] * s[1], s[2]});
        TensorId t = b.view(prefix + ".target_view", target, {s[0] * s[1]});
        return b.cross_entropy(prefix, flat, t);
      }
      if (s.size() >= 4) {
        // Per pixel: F.cross_entropy on [N,C,d1..dk] (class dimension 1) with targets [N,d1..dk].
        std::vector<int64_t> ts = {s[0]};
        ts.insert(ts.end(), s.begin() + 2, s.end());
        return b.cross_entropy(prefix, output, b.target(prefix + ".target", ts, DType::I64));
      }
      throw InputError("cross-entropy loss needs logits [N,C], [B,S,V] or [N,C,H,W,...], the model output is rank " +
                       std::to_string(s.size()));
    }
    case LossKind::NextToken: {
      if (s.size() != 3) {
        throw InputError("next-token loss needs sequence logits [B,S,V], the model output is rank " +
                         std::to_string(s.size()));
      }
      if (s[1] < 2) throw InputError("next-token loss needs a sequence of at least 2 tokens");
      // HF causal LMs: shift_logits = logits[..., :-1, :].contiguous() (a copy),
      // shift_labels = labels[..., 1:].contiguous() (a copy of the int64 labels).
      // Python indexing makes one slice per `:` (PyTorch 1.13 skips no full-range slice), and each
      // slice's backward allocates a gradient of its input's size.
      TensorId labels = b.target(prefix + ".labels", {s[0], s[1]}, DType::I64);
      TensorId sl = b.slice(prefix + ".shift_logits", output, 1, 0, s[1] - 1);
      sl = b.slice(prefix + ".shift_logits", sl, 2, 0, s[2]);
      TensorId slc = b.contiguous(prefix + ".shift_logits.contiguous", sl);
      b.hold(slc);  // the local `shift_logits` lives until the loss function returns
      TensorId lab = b.slice(prefix + ".shift_labels", labels, 1, 1, s[1]);
      TensorId labc = b.contiguous(prefix + ".shift_labels.contiguous", lab);
      int64_t n = s[0] * (s[1] - 1);
      TensorId flat = b.view(prefix + ".view", slc, {n, s[2]});
      TensorId flat_labels = b.view(prefix + ".labels_view", labc, {n});
      return b.cross_entropy(prefix, flat, flat_labels);
    }
    case LossKind::Default: break;
  }
  throw InputError("model has no default loss; pass --loss");
}

}  // namespace headroom
