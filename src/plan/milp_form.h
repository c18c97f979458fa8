// A mixed-integer program being built row by row (columns with bounds, costs and integrality;
// rows as sparse linear expressions with a sense), and its hand-over to COIN-OR CBC. Shared by the
// integer programs of plan --graph (remat_ilp.h, checkmate_ilp.h), so that both load CBC the same
// way.
//
// Invariant: every row holds at least one column; a row whose variables are all fixed away (the
// expression is a constant) is checked when added and, if it fails, sets constant_rows_violated
// (the program is infeasible without a solver).
#pragma once

#include <coin/Cbc_C_Interface.h>

#include <utility>
#include <vector>

namespace headroom {

// A linear expression over column indices plus a constant; index -1 is a variable fixed at 0.
struct Expr {
  std::vector<std::pair<int, double>> terms;
  double constant = 0;
  Expr& add(int col, double coef) {
    if (col >= 0 && coef != 0) terms.emplace_back(col, coef);
    return *this;
  }
  Expr& plus(double c) {
    constant += c;
    return *this;
  }
};

struct Form {
  std::vector<double> obj, lb, ub;
  std::vector<char> integer;
  std::vector<int> row_start, row_index;
  std::vector<double> row_value, row_rhs;
  std::vector<char> row_sense;
  bool constant_rows_violated = false;

  int col(double lo, double hi, double cost, bool is_int);
  int binary(double cost = 0) { return col(0, 1, cost, true); }
  // e (sense: 'L' <=, 'G' >=, 'E' =) rhs, with e's constant moved to the right.
  void row(const Expr& e, char sense, double rhs);
  int rows() const { return static_cast<int>(row_start.size()); }
  int columns() const { return static_cast<int>(obj.size()); }
};

// Loads the program into `model` (columns, rows, integrality); CBC's parameters are the caller's.
void load_form_into_cbc(const Form& form, Cbc_Model* model);

}  // namespace headroom
