"""Word search's analysis of text: the language a text is written in, and the terms its
words give in that language (issue 18)."""
