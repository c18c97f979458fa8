// COIN-OR CBC's C interface (coin/Cbc_C_Interface.h), opened at run time: each function used by
// the integer programs (remat_ilp.cc, cbc_deadline.cc) is defined here under its own name and
// forwards to libCbcSolver, which is dlopen'ed on the first call. headroom links no COIN-OR
// library, so a run that solves no integer program never maps CBC, Clp, Cgl, Osi, CoinUtils,
// LAPACK, BLAS and gfortran (about half of the relocations a start-up paid before,
// docs/speed.md). A function used without a forwarder here is a link error, not a
// silent fallback.
#include <coin/Cbc_C_Interface.h>

#include "util/plugins.h"

namespace {

void* cbc_function(const char* name) {
  static void* handle = headroom::open_system_library(HEADROOM_CBC_SONAME, "the integer program (plan --graph)",
                                                      "coinor-libcbc3");
  return headroom::plugin_symbol(handle, HEADROOM_CBC_SONAME, name);
}

}  // namespace

// One forwarder per function: its pointer is looked up once (a function-local static).
#define HEADROOM_CBC_FORWARD(ret, name, params, args)                           \
  ret name params {                                                              \
    static const auto fn = reinterpret_cast<decltype(&name)>(cbc_function(#name)); \
    return fn args;                                                              \
  }

extern "C" {
HEADROOM_CBC_FORWARD(Cbc_Model*, Cbc_newModel, (void), ())
HEADROOM_CBC_FORWARD(void, Cbc_deleteModel, (Cbc_Model * model), (model))
HEADROOM_CBC_FORWARD(void, Cbc_loadProblem,
                     (Cbc_Model * model, const int numcols, const int numrows, const CoinBigIndex* start,
                      const int* index, const double* value, const double* collb, const double* colub,
                      const double* obj, const double* rowlb, const double* rowub),
                     (model, numcols, numrows, start, index, value, collb, colub, obj, rowlb, rowub))
HEADROOM_CBC_FORWARD(void, Cbc_setInteger, (Cbc_Model * model, int iColumn), (model, iColumn))
HEADROOM_CBC_FORWARD(void, Cbc_setParameter, (Cbc_Model * model, const char* name, const char* value),
                     (model, name, value))
HEADROOM_CBC_FORWARD(void, Cbc_setLogLevel, (Cbc_Model * model, int logLevel), (model, logLevel))
HEADROOM_CBC_FORWARD(void, Cbc_setMaximumSeconds, (Cbc_Model * model, double maxSeconds), (model, maxSeconds))
HEADROOM_CBC_FORWARD(void, Cbc_setAllowableGap, (Cbc_Model * model, double allowedGap), (model, allowedGap))
HEADROOM_CBC_FORWARD(void, Cbc_setAllowableFractionGap, (Cbc_Model * model, double allowedFracionGap),
                     (model, allowedFracionGap))
HEADROOM_CBC_FORWARD(void, Cbc_setCutoff, (Cbc_Model * model, double cutoff), (model, cutoff))
HEADROOM_CBC_FORWARD(void, Cbc_setMIPStartI, (Cbc_Model * model, int count, const int colIdxs[], const double colValues[]),
                     (model, count, colIdxs, colValues))
HEADROOM_CBC_FORWARD(int, Cbc_solve, (Cbc_Model * model), (model))
HEADROOM_CBC_FORWARD(double*, Cbc_bestSolution, (Cbc_Model * model), (model))
HEADROOM_CBC_FORWARD(double, Cbc_getObjValue, (Cbc_Model * model), (model))
HEADROOM_CBC_FORWARD(double, Cbc_getBestPossibleObjValue, (Cbc_Model * model), (model))
HEADROOM_CBC_FORWARD(int, Cbc_isProvenOptimal, (Cbc_Model * model), (model))
HEADROOM_CBC_FORWARD(int, Cbc_isProvenInfeasible, (Cbc_Model * model), (model))
}
