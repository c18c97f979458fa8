// Building a program row by row and loading it into CBC (milp_form.h).
#include "plan/milp_form.h"

#include <cmath>

namespace headroom {

int Form::col(double lo, double hi, double cost, bool is_int) {
  obj.push_back(cost);
  lb.push_back(lo);
  ub.push_back(hi);
  integer.push_back(is_int ? 1 : 0);
  return static_cast<int>(obj.size()) - 1;
}

void Form::row(const Expr& e, char sense, double rhs) {
  const double r = rhs - e.constant;
  if (e.terms.empty()) {
    const bool holds = sense == 'L' ? 0 <= r + 1e-9 : sense == 'G' ? 0 >= r - 1e-9 : std::abs(r) < 1e-9;
    if (!holds) constant_rows_violated = true;
    return;
  }
  row_start.push_back(static_cast<int>(row_index.size()));
  for (auto [c, v] : e.terms) {
    row_index.push_back(c);
    row_value.push_back(v);
  }
  row_sense.push_back(sense);
  row_rhs.push_back(r);
}

void load_form_into_cbc(const Form& f, Cbc_Model* m) {
  // CBC's loader takes the matrix column by column: transpose the rows.
  const int nrows = f.rows();
  std::vector<std::vector<std::pair<int, double>>> by_col(f.obj.size());
  for (int r = 0; r < nrows; ++r) {
    const size_t begin = static_cast<size_t>(f.row_start[static_cast<size_t>(r)]);
    const size_t end = r + 1 < nrows ? static_cast<size_t>(f.row_start[static_cast<size_t>(r) + 1]) : f.row_index.size();
    for (size_t k = begin; k < end; ++k)
      by_col[static_cast<size_t>(f.row_index[k])].emplace_back(r, f.row_value[k]);
  }
  std::vector<int> starts{0}, index;
  std::vector<double> value;
  for (const auto& colv : by_col) {
    for (auto [r, v] : colv) {
      index.push_back(r);
      value.push_back(v);
    }
    starts.push_back(static_cast<int>(index.size()));
  }
  std::vector<double> row_lo, row_hi;
  for (int r = 0; r < nrows; ++r) {
    const double rhs = f.row_rhs[static_cast<size_t>(r)];
    const char sense = f.row_sense[static_cast<size_t>(r)];
    row_lo.push_back(sense == 'L' ? -1e30 : rhs);
    row_hi.push_back(sense == 'G' ? 1e30 : rhs);
  }
  Cbc_loadProblem(m, f.columns(), nrows, starts.data(), index.data(), value.data(), f.lb.data(), f.ub.data(),
                  f.obj.data(), row_lo.data(), row_hi.data());
  for (size_t k = 0; k < f.obj.size(); ++k)
    if (f.integer[k]) Cbc_setInteger(m, static_cast<int>(k));
}

}  // namespace headroom
