/* remat: umbrella header. */
#ifndef REMAT_H
#define REMAT_H
#include "remat/status.h"
#include "remat/model.h"
#include "remat/schedule.h"
#include "remat/simulate.h"
#include "remat/solvers.h"
#include "remat/join.h"
#include "remat/exec.h"
#include "remat/hjoin.h"
#endif
