/*
 * link_main.c - the empty program of the layer-link checks
 * (tests/layers/meson.build): each module's library is linked into it
 * whole, with only the libraries its meson.build says it uses, so a call
 * from a lower module into a higher one is an undefined symbol.
 */
int main(void);

int
main(void)
{
	return 0;
}
