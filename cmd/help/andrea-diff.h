/* andrea-diff's --help, written by tools/gen-help.py from man/man1/andrea-diff.1:
 * do not edit; run `make help`. */
static const char usage[] =
	"usage: andrea-diff [-q] [--rtol RTOL] [--atol ATOL] [--equal-nan] [--by-name]\n"
	"                   [--threads N] A B\n"
	"\n"
	"options (see the man page for more):\n"
	"  -q, --quiet, --silent\n"
	"                        Write nothing on standard output; report only through\n"
	"                        the exit status.\n"
	"  --rtol RTOL           Relative tolerance, a finite number >= 0.\n"
	"  --atol ATOL           Absolute tolerance, a finite number >= 0.\n"
	"  --equal-nan           Count a NaN in A as equal to a NaN at the same position\n"
	"                        of B.\n"
	"  --by-name             Pair records by name (and layer and head) instead of by\n"
	"                        position, as the manual page says.\n"
	"  --threads N           Use up to N threads (1 to 256) to decompress chunks and\n"
	"                        to compare large records.\n"
	"  -h, --help            Print the synopsis and a line for each option, and exit\n"
	"                        0.\n"
	"  --version             Print the version and exit 0.\n";
