/* andrea-lens's --help, written by tools/gen-help.py from man/man1/andrea-lens.1:
 * do not edit; run `make help`. */
static const char usage[] =
	"usage: andrea-lens [-f] [-o FILE] [-m MODEL] [--seed S] [--heads N] [--top K]\n"
	"                   [--token ID [--versus ID]] [--device DEV] [-z LEVEL]\n"
	"                   [--threads N] [--no-shuffle] [FILE]\n"
	"\n"
	"options (see the man page for more):\n"
	"  --top K               Tokens a position in the lens, default 5 (at most V).\n"
	"  --token ID            Attribute that token's logit.\n"
	"  --versus ID           Attribute the difference of --token's logit and this\n"
	"                        one's.\n"
	"  --device DEV          auto, cpu or cuda.\n"
	"  -m MODEL, --seed S, --heads N\n"
	"  -o FILE, -f, -z LEVEL, --threads N, --no-shuffle\n"
	"                        As in every andrea tool (andrea(7)).\n"
	"  -h, --help            Print the synopsis and a line for each option, and exit\n"
	"                        0.\n"
	"  --version             Print the version and exit 0.\n";
