#include "training/device_profile.h"

namespace headroom {

DeviceProfile DeviceProfile::cuda() {
  DeviceProfile d;
  d.name = "cuda";
  d.conv_forward_output_scratch = false;
  d.dropout_mask_same_dtype = false;
  d.default_foreach = true;
  return d;
}

DeviceProfile DeviceProfile::cpu() {
  DeviceProfile d;
  d.name = "cpu";
  d.conv_forward_output_scratch = true;
  d.dropout_mask_same_dtype = true;
  d.default_foreach = false;
  d.max_pool_indices_without_grad = false;
  return d;
}

}  // namespace headroom
