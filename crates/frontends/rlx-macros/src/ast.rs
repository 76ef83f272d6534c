//! The `rlx!` language's syntax tree and parser.
//!
//! ```text
//! program := item*
//! item    := "graph" STRING ";"
//!          | ("input" | "param") IDENT ":" DTYPE? "[" dim,* "]" ";"
//!          | "let" IDENT "=" expr ";"
//!          | "out" IDENT ("," IDENT)* ";"
//! dim     := INT | "?" | IDENT                      (size, dynamic, named symbol)
//! expr    := term (("+" | "-") term)*
//! term    := unary (("*" | "/" | "@") unary)*      (`@` binds like `*`, as in NumPy)
//! unary   := "-" unary | IDENT "(" expr,* ")" | IDENT | NUMBER | "(" expr ")"
//! ```

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitFloat, LitInt, LitStr, Token, bracketed, parenthesized};

syn::custom_keyword!(graph);
syn::custom_keyword!(input);
syn::custom_keyword!(param);
syn::custom_keyword!(out);

/// One declared dim.
#[derive(Clone, Debug, PartialEq)]
pub enum DimSpec {
    Static(usize),
    Dynamic,
    Sym(String),
}

/// `input` or `param`.
#[derive(Clone, Copy, PartialEq)]
pub enum SourceKind {
    Input,
    Param,
}

pub struct Decl {
    pub kind: SourceKind,
    pub name: Ident,
    pub dtype: Option<Ident>,
    pub dims: Vec<DimSpec>,
}

pub enum Item {
    Graph(LitStr),
    Source(Decl),
    Let(Ident, Expr),
    Out(Vec<Ident>),
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    MatMul,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::MatMul => "@",
        }
    }
}

pub enum Expr {
    Var(Ident),
    Num(f64, Span),
    Call(Ident, Vec<Expr>),
    Neg(Box<Expr>, Span),
    Bin(Box<Expr>, BinOp, Span, Box<Expr>),
}

impl Expr {
    /// The span to point at for errors about this expression.
    pub fn span(&self) -> Span {
        match self {
            Expr::Var(i) | Expr::Call(i, _) => i.span(),
            Expr::Num(_, s) | Expr::Neg(_, s) | Expr::Bin(_, _, s, _) => *s,
        }
    }
    /// An integer literal (possibly negated), for axis arguments.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Expr::Num(v, _) if v.fract() == 0.0 => Some(*v as i64),
            Expr::Neg(e, _) => e.as_int().map(|v| -v),
            _ => None,
        }
    }
}

pub struct Program {
    pub items: Vec<Item>,
}

impl Parse for Program {
    fn parse(input: ParseStream) -> syn::Result<Program> {
        let mut items = vec![];
        while !input.is_empty() {
            items.push(input.parse()?);
        }
        Ok(Program { items })
    }
}

impl Parse for Item {
    fn parse(input: ParseStream) -> syn::Result<Item> {
        let la = input.lookahead1();
        let item = if la.peek(graph) {
            input.parse::<graph>()?;
            Item::Graph(input.parse()?)
        } else if la.peek(self::input) || la.peek(param) {
            let kind = if input.peek(self::input) {
                input.parse::<self::input>()?;
                SourceKind::Input
            } else {
                input.parse::<param>()?;
                SourceKind::Param
            };
            let name: Ident = input.parse()?;
            input.parse::<Token![:]>()?;
            let dtype = if input.peek(Ident) { Some(input.parse()?) } else { None };
            let content;
            bracketed!(content in input);
            Item::Source(Decl { kind, name, dtype, dims: parse_dims(&content)? })
        } else if la.peek(Token![let]) {
            input.parse::<Token![let]>()?;
            let name: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            Item::Let(name, parse_expr(input)?)
        } else if la.peek(out) {
            input.parse::<out>()?;
            let names = syn::punctuated::Punctuated::<Ident, Token![,]>::parse_separated_nonempty(input)?;
            Item::Out(names.into_iter().collect())
        } else {
            return Err(la.error());
        };
        input.parse::<Token![;]>()?;
        Ok(item)
    }
}

/// Dims separated by commas; each is read as a whole token group so a bad one (`-1`, `3.5`,
/// `"n"`) is reported as one span with what is allowed.
fn parse_dims(input: ParseStream) -> syn::Result<Vec<DimSpec>> {
    let mut dims = vec![];
    while !input.is_empty() {
        let mut toks = TokenStream::new();
        while !input.is_empty() && !input.peek(Token![,]) {
            toks.extend([input.parse::<TokenTree>()?]);
        }
        dims.push(parse_dim(toks)?);
        if !input.is_empty() {
            input.parse::<Token![,]>()?;
        }
    }
    Ok(dims)
}

fn parse_dim(toks: TokenStream) -> syn::Result<DimSpec> {
    let tt: Vec<TokenTree> = toks.clone().into_iter().collect();
    let bad = || {
        syn::Error::new_spanned(
            &toks,
            format!(
                "bad dim `{toks}`: a dim is a non-negative integer size (`784`), `?` (dynamic) or a symbol name (`batch`)"
            ),
        )
    };
    match tt.as_slice() {
        [TokenTree::Punct(p)] if p.as_char() == '?' => Ok(DimSpec::Dynamic),
        [TokenTree::Ident(i)] => Ok(DimSpec::Sym(i.to_string())),
        [TokenTree::Literal(_)] => {
            let lit: LitInt = syn::parse2(toks.clone()).map_err(|_| bad())?;
            if !lit.suffix().is_empty() {
                return Err(bad());
            }
            lit.base10_parse::<usize>().map(DimSpec::Static).map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}

pub fn parse_expr(input: ParseStream) -> syn::Result<Expr> {
    let mut lhs = parse_term(input)?;
    loop {
        let (op, span) = if input.peek(Token![+]) {
            (BinOp::Add, input.parse::<Token![+]>()?.span)
        } else if input.peek(Token![-]) {
            (BinOp::Sub, input.parse::<Token![-]>()?.span)
        } else {
            return Ok(lhs);
        };
        let rhs = parse_term(input)?;
        lhs = Expr::Bin(Box::new(lhs), op, span, Box::new(rhs));
    }
}

fn parse_term(input: ParseStream) -> syn::Result<Expr> {
    let mut lhs = parse_unary(input)?;
    loop {
        let (op, span) = if input.peek(Token![*]) {
            (BinOp::Mul, input.parse::<Token![*]>()?.span)
        } else if input.peek(Token![/]) {
            (BinOp::Div, input.parse::<Token![/]>()?.span)
        } else if input.peek(Token![@]) {
            (BinOp::MatMul, input.parse::<Token![@]>()?.span)
        } else {
            return Ok(lhs);
        };
        let rhs = parse_unary(input)?;
        lhs = Expr::Bin(Box::new(lhs), op, span, Box::new(rhs));
    }
}

fn parse_unary(input: ParseStream) -> syn::Result<Expr> {
    if input.peek(Token![-]) {
        let span = input.parse::<Token![-]>()?.span;
        return Ok(Expr::Neg(Box::new(parse_unary(input)?), span));
    }
    if input.peek(syn::token::Paren) {
        let content;
        parenthesized!(content in input);
        let e = parse_expr(&content)?;
        if !content.is_empty() {
            return Err(content.error("expected an operator or `)`"));
        }
        return Ok(e);
    }
    if input.peek(LitInt) {
        let l: LitInt = input.parse()?;
        return Ok(Expr::Num(l.base10_parse::<f64>()?, l.span()));
    }
    if input.peek(LitFloat) {
        let l: LitFloat = input.parse()?;
        return Ok(Expr::Num(l.base10_parse::<f64>()?, l.span()));
    }
    let name: Ident = input.parse().map_err(|e| syn::Error::new(e.span(), "expected a name, a number or `(`"))?;
    if input.peek(syn::token::Paren) {
        let content;
        parenthesized!(content in input);
        let mut args = vec![];
        while !content.is_empty() {
            args.push(parse_expr(&content)?);
            if !content.is_empty() {
                content.parse::<Token![,]>()?;
            }
        }
        return Ok(Expr::Call(name, args));
    }
    Ok(Expr::Var(name))
}
