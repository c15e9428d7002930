/* andrea-export's --help, written by tools/gen-help.py from man/man1/andrea-export.1:
 * do not edit; run `make help`. */
static const char usage[] =
	"usage: andrea-export [-m MODEL] [--seed S] [--heads N] [--threads N] DIR\n"
	"\n"
	"options (see the man page for more):\n"
	"  -m MODEL              The model file.\n"
	"  --seed S\n"
	"  --heads N             As in every tool that opens a model (andrea-model(5)).\n"
	"  --threads N           As in every andrea tool (andrea(7)).\n"
	"  -h, --help            Print the synopsis and a line for each option, and exit\n"
	"                        0.\n"
	"  --version             Print the version and exit 0.\n";
