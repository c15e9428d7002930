/* andrea-patch's --help, written by tools/gen-help.py from man/man1/andrea-patch.1:
 * do not edit; run `make help`. */
static const char usage[] =
	"usage: andrea-patch [-f] [-o FILE] [-m MODEL] [--seed S] [--heads N] --clean\n"
	"                    FILE --corrupted FILE --answer ID --wrong ID\n"
	"                    [--sweep heads|positions] [--table] [--device DEV]\n"
	"                    [-z LEVEL] [--threads N] [--no-shuffle]\n"
	"\n"
	"options (see the man page for more):\n"
	"  --clean FILE, --corrupted FILE\n"
	"                        The two inputs.\n"
	"  --answer ID, --wrong ID\n"
	"                        The tokens whose logit difference is the metric; each\n"
	"                        below the model's V.\n"
	"  --sweep heads|positions\n"
	"                        What to patch, as the manual page says.\n"
	"  --table               Print the table instead of writing the record.\n"
	"  -m MODEL, --seed S, --heads N\n"
	"  -o FILE, -f, -z LEVEL, --threads N, --no-shuffle\n"
	"                        As in every andrea tool (andrea(7)).\n"
	"  --device DEV          auto, cpu or cuda: where the sweep computes.\n"
	"  -h, --help            Print the synopsis and a line for each option, and exit\n"
	"                        0.\n"
	"  --version             Print the version and exit 0.\n";
