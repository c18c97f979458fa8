#include "training/device_profile.h"

namespace headroom {

DeviceProfile DeviceProfile::cuda() {
  DeviceProfile d;
  d.name = "cuda";
  d.dropout_mask_same_dtype = false;
  d.default_foreach = true;
  d.mha_sdpa = true;
  d.grad_accumulate_inplace = true;
  d.mm_weight_grad_first = true;
  d.softmax_backward_temp = true;
  d.cublas_workspace_bytes = 4096 * 1024 * 2 + 16 * 1024 * 8;  // 8,519,680 (pre-Hopper)
  d.cublaslt_workspace_bytes = 1024 * 1024;  // CUBLASLT_WORKSPACE_SIZE's default, 1024 KiB
  d.conv_workspace = ConvWorkspace::Cudnn9;  // measured on the H100 (docs/gpu.md)
  return d;
}

DeviceProfile DeviceProfile::cpu() {
  DeviceProfile d;
  d.name = "cpu";
  d.onednn_conv = true;
  d.dropout_mask_same_dtype = true;
  d.default_foreach = false;
  d.batch_norm_cpu_temporaries = true;
  d.layer_norm_backward_temp = true;
  d.optimizer_record_function = true;
  d.python_scalar_tensors = true;
  d.mean_keeps_input = true;
  d.optimizer_step_on_device = true;
  d.torch_optim_v2 = false;  // PyTorch 1.13 (validation/measured.json)
  d.checkpoint_rng_state_bytes = 5056;  // torch.get_rng_state().numel() in 1.13 (measured)
  return d;
}

}  // namespace headroom
