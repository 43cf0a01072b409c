#include "trace/trace-hw_cxlpod.h"
