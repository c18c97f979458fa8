// Prints the peak of a built-in model through the installed library's option parsing and estimate.
#include <iostream>

#include "estimate/estimate.h"
#include "options/run_args.h"

int main() {
  headroom::RunArgs a;
  a.model = "mlp:layers=2,dim=64";
  headroom::Result<headroom::EstimateOptions> o = headroom::to_estimate_options(a);
  if (!o.ok()) return 1;
  headroom::Result<headroom::Estimate> e = headroom::estimate(o.value());
  if (!e.ok()) return 1;
  std::cout << e.value().peak_bytes << "\n";
  return 0;
}
