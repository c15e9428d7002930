/* precision.c - the names of the precisions (precision.h). */
#include "ops/precision.h"

#include <string.h>

static const char *const names[] = {"fp32", "tf32", "bf16"};

int at_precision_parse(const char *name)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

const char *at_precision_name(int precision)
{
	return precision >= 0 && precision < 3 ? names[precision] : "?";
}
