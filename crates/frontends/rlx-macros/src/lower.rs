//! Lowering: each statement becomes `rlx_ir::Graph` builder calls, and shapes are followed
//! statically so mismatches between static dims are compile errors at the offending span.
//! The builder still checks everything at run time (symbolic dims, dtypes); the static check
//! only moves the errors it can prove to compile time.

use crate::ast::{BinOp, Decl, DimSpec, Expr, Item, Program, SourceKind};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use std::collections::HashMap;
use syn::{Error, Ident, Result};

/// A dim as far as the macro knows it.
#[derive(Clone, Debug, PartialEq)]
enum D {
    Static(usize),
    Sym(String),
}

impl std::fmt::Display for D {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            D::Static(n) => write!(f, "{n}"),
            D::Sym(s) => f.write_str(s),
        }
    }
}

/// A value's dims, `None` when the macro cannot follow them.
type Sh = Option<Vec<D>>;

fn fmt_sh(s: &[D]) -> String {
    format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

/// What an expression lowered to.
#[derive(Clone)]
enum Val {
    Node(Ident, Sh),
    Num(f64),
}

const FUNCTIONS: &str = "relu, gelu, gelu_tanh, silu, sigmoid, tanh, exp, log, sqrt, rsqrt, abs, neg, square, erf, \
    sin, cos, softmax, log_softmax, layer_norm, rms_norm, matmul, maximum, minimum, pow, sum, mean, max, \
    transpose, cross_entropy";

struct Lower {
    ir: TokenStream,
    stmts: Vec<TokenStream>,
    env: HashMap<String, (Ident, Sh)>,
    next: usize,
}

/// NumPy broadcasting of two static shapes; `Err` names the first clashing pair.
fn broadcast(a: &[D], b: &[D]) -> std::result::Result<Vec<D>, (D, D)> {
    let n = a.len().max(b.len());
    let mut out = vec![];
    for i in 0..n {
        let x = (i + a.len()).checked_sub(n).map(|k| &a[k]);
        let y = (i + b.len()).checked_sub(n).map(|k| &b[k]);
        out.push(match (x, y) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(D::Static(1)), Some(y)) => y.clone(),
            (Some(x), Some(D::Static(1))) => x.clone(),
            (Some(x), Some(y)) if x == y => x.clone(),
            (Some(D::Static(p)), Some(D::Static(q))) => return Err((D::Static(*p), D::Static(*q))),
            // A symbol against another dim: only known at run time.
            (Some(x), Some(_)) => x.clone(),
            (None, None) => unreachable!(),
        });
    }
    Ok(out)
}

fn matmul_shape(a: &[D], b: &[D], span: Span) -> Result<Sh> {
    let err = |m: String| Err(Error::new(span, m));
    if a.is_empty() || b.is_empty() {
        return err("shape mismatch in `@`: both operands need rank >= 1".into());
    }
    let ka = &a[a.len() - 1];
    let kb = if b.len() == 1 { &b[0] } else { &b[b.len() - 2] };
    if let (D::Static(p), D::Static(q)) = (ka, kb)
        && p != q
    {
        return err(format!(
            "shape mismatch in `@`: left is {}, right is {}; the contracted dims {p} and {q} differ",
            fmt_sh(a),
            fmt_sh(b)
        ));
    }
    Ok(match (a.len(), b.len()) {
        (1, 1) => Some(vec![]),
        (_, 1) => Some(a[..a.len() - 1].to_vec()),
        (1, _) => Some([&b[..b.len() - 2], &b[b.len() - 1..]].concat()),
        _ => match broadcast(&a[..a.len() - 2], &b[..b.len() - 2]) {
            Ok(mut batch) => {
                batch.extend([a[a.len() - 2].clone(), b[b.len() - 1].clone()]);
                Some(batch)
            }
            Err((p, q)) => {
                return err(format!(
                    "shape mismatch in `@`: batch dims of {} and {} do not broadcast ({p} vs {q})",
                    fmt_sh(a),
                    fmt_sh(b)
                ));
            }
        },
    })
}

impl Lower {
    fn fresh(&mut self) -> Ident {
        self.next += 1;
        format_ident!("__rlx_t{}", self.next)
    }

    fn emit(&mut self, code: TokenStream, sh: Sh) -> Val {
        let id = self.fresh();
        self.stmts.push(quote! { let #id = #code; });
        Val::Node(id, sh)
    }

    /// A tensor operand: a node, or a literal as an f32 scalar / a scalar like `like`.
    fn node(&mut self, v: &Val, like: Option<&Ident>) -> (Ident, Sh) {
        match v {
            Val::Node(i, s) => (i.clone(), s.clone()),
            Val::Num(x) => {
                let code = match like {
                    Some(l) => quote! { __rlx_g.scalar_like(#x, #l) },
                    None => {
                        let ir = &self.ir;
                        quote! { __rlx_g.scalar(#x, #ir::DType::F32) }
                    }
                };
                let Val::Node(i, s) = self.emit(code, Some(vec![])) else { unreachable!() };
                (i, s)
            }
        }
    }

    fn binary(&mut self, a: Val, op: BinOp, span: Span, b: Val) -> Result<Val> {
        if let (Val::Num(x), Val::Num(y)) = (&a, &b) {
            return Ok(Val::Num(match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul | BinOp::MatMul => x * y,
                BinOp::Div => x / y,
            }));
        }
        let la = if let Val::Node(i, _) = &a { Some(i.clone()) } else { None };
        let lb = if let Val::Node(i, _) = &b { Some(i.clone()) } else { None };
        let (x, sx) = self.node(&a, lb.as_ref());
        let (y, sy) = self.node(&b, la.as_ref());
        if op == BinOp::MatMul {
            let sh = match (&sx, &sy) {
                (Some(p), Some(q)) => matmul_shape(p, q, span)?,
                _ => None,
            };
            return Ok(self.emit(quote! { __rlx_g.mm(#x, #y) }, sh));
        }
        let sh = match (&sx, &sy) {
            (Some(p), Some(q)) => match broadcast(p, q) {
                Ok(s) => Some(s),
                Err((m, n)) => {
                    let msg = format!(
                        "shape mismatch in `{}`: {} and {} do not broadcast ({m} vs {n})",
                        op.symbol(),
                        fmt_sh(p),
                        fmt_sh(q)
                    );
                    return Err(Error::new(span, msg));
                }
            },
            _ => None,
        };
        let f = format_ident!(
            "{}",
            match op {
                BinOp::Add => "add",
                BinOp::Sub => "sub",
                BinOp::Mul => "mul",
                _ => "div",
            }
        );
        Ok(self.emit(quote! { __rlx_g.#f(#x, #y) }, sh))
    }

    fn expr(&mut self, e: &Expr) -> Result<Val> {
        match e {
            Expr::Num(v, _) => Ok(Val::Num(*v)),
            Expr::Var(name) => match self.env.get(&name.to_string()) {
                Some((i, s)) => Ok(Val::Node(i.clone(), s.clone())),
                None => Err(Error::new_spanned(
                    name,
                    format!("unknown identifier `{name}`: declare it with `input`, `param` or `let` before using it"),
                )),
            },
            Expr::Neg(x, _) => match self.expr(x)? {
                Val::Num(v) => Ok(Val::Num(-v)),
                Val::Node(i, s) => Ok(self.emit(quote! { __rlx_g.neg(#i) }, s)),
            },
            Expr::Bin(a, op, span, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                self.binary(a, *op, *span, b)
            }
            Expr::Call(f, args) => self.call(f, args),
        }
    }

    fn call(&mut self, f: &Ident, args: &[Expr]) -> Result<Val> {
        let name = f.to_string();
        let arity = |lo: usize, hi: usize| -> Result<()> {
            if args.len() < lo || args.len() > hi {
                let want = if lo == hi { format!("{lo}") } else { format!("{lo} to {hi}") };
                return Err(Error::new_spanned(f, format!("`{name}` takes {want} arguments, got {}", args.len())));
            }
            Ok(())
        };
        let axis_arg = |k: usize, default: Option<i64>| -> Result<i64> {
            match args.get(k) {
                None => default.ok_or_else(|| Error::new_spanned(f, format!("`{name}` needs an axis argument"))),
                Some(a) => a.as_int().ok_or_else(|| Error::new(a.span(), "an axis must be an integer literal")),
            }
        };
        let unary = |f: &str| -> Option<TokenStream> {
            Some(match f {
                "relu" | "silu" | "tanh" | "exp" | "log" | "sqrt" | "rsqrt" | "abs" | "neg" | "square" | "erf"
                | "sin" | "cos" => {
                    let m = format_ident!("{f}");
                    quote! { #m(__rlx_a) }
                }
                "gelu" => quote! { gelu(__rlx_a, false) },
                "gelu_tanh" => quote! { gelu(__rlx_a, true) },
                "sigmoid" => quote! { logistic(__rlx_a) },
                _ => return None,
            })
        };
        if let Some(code) = unary(&name) {
            arity(1, 1)?;
            let v = self.expr(&args[0])?;
            let (a, s) = self.node(&v, None);
            return Ok(self.emit(quote! { { let __rlx_a = #a; __rlx_g.#code } }, s));
        }
        match name.as_str() {
            "softmax" | "log_softmax" => {
                arity(1, 2)?;
                let ax = axis_arg(1, Some(-1))?;
                let v = self.expr(&args[0])?;
                let (a, s) = self.node(&v, None);
                let m = format_ident!("{name}");
                Ok(self.emit(quote! { __rlx_g.#m(#a, #ax) }, s))
            }
            "layer_norm" | "rms_norm" => {
                let max = if name == "layer_norm" { 3 } else { 2 };
                arity(1, max)?;
                let mut ids = vec![];
                for a in args {
                    let v = self.expr(a)?;
                    ids.push(self.node(&v, None));
                }
                let (x, s) = ids[0].clone();
                let opt = |k: usize| match ids.get(k) {
                    Some((i, _)) => quote! { Some(#i) },
                    None => quote! { None },
                };
                let (g1, g2) = (opt(1), opt(2));
                let code = if name == "layer_norm" {
                    quote! { __rlx_g.layer_norm(#x, #g1, #g2, -1, 1e-5) }
                } else {
                    quote! { __rlx_g.rms_norm(#x, #g1, -1, 1e-6) }
                };
                Ok(self.emit(code, s))
            }
            "matmul" | "maximum" | "minimum" | "pow" => {
                arity(2, 2)?;
                let (a, b) = (self.expr(&args[0])?, self.expr(&args[1])?);
                if name == "matmul" {
                    return self.binary(a, BinOp::MatMul, f.span(), b);
                }
                let (x, sx) = self.node(&a, None);
                let (y, sy) = self.node(&b, None);
                let sh = match (sx, sy) {
                    (Some(p), Some(q)) => Some(broadcast(&p, &q).map_err(|(m, n)| {
                        Error::new_spanned(f, format!("shape mismatch in `{name}`: {m} vs {n} do not broadcast"))
                    })?),
                    _ => None,
                };
                let m = format_ident!("{}", &name[..3]);
                Ok(self.emit(quote! { __rlx_g.#m(#x, #y) }, sh))
            }
            "sum" | "mean" | "max" => {
                arity(2, 2)?;
                let ax = axis_arg(1, None)?;
                let v = self.expr(&args[0])?;
                let (a, s) = self.node(&v, None);
                let sh = s.and_then(|mut d| {
                    let r = d.len() as i64;
                    let k = if ax < 0 { ax + r } else { ax };
                    ((0..r).contains(&k)).then(|| {
                        d.remove(k as usize);
                        d
                    })
                });
                let m = format_ident!("{}", if name == "max" { "reduce_max" } else { &name });
                Ok(self.emit(quote! { __rlx_g.#m(#a, &[#ax], false) }, sh))
            }
            "transpose" => {
                arity(1, 1)?;
                let v = self.expr(&args[0])?;
                let (a, s) = self.node(&v, None);
                let Some(mut d) = s else {
                    return Err(Error::new_spanned(f, "`transpose` needs an operand of known rank"));
                };
                if d.len() < 2 {
                    return Err(Error::new_spanned(f, "`transpose` swaps the last two dims: needs rank >= 2"));
                }
                let r = d.len();
                let mut perm: Vec<usize> = (0..r).collect();
                perm.swap(r - 2, r - 1);
                d.swap(r - 2, r - 1);
                Ok(self.emit(quote! { __rlx_g.transpose(#a, &[#(#perm),*]) }, Some(d)))
            }
            "cross_entropy" => {
                arity(2, 2)?;
                let (a, b) = (self.expr(&args[0])?, self.expr(&args[1])?);
                let (x, _) = self.node(&a, None);
                let (y, _) = self.node(&b, None);
                Ok(self.emit(quote! { __rlx_g.cross_entropy(#x, #y) }, Some(vec![])))
            }
            _ => Err(Error::new_spanned(f, format!("unknown function `{name}` (known: {FUNCTIONS})"))),
        }
    }

    fn source(&mut self, d: &Decl) -> Result<()> {
        let name = d.name.to_string();
        if self.env.contains_key(&name) {
            return Err(Error::new_spanned(&d.name, format!("`{name}` is declared twice")));
        }
        let ir = self.ir.clone();
        let dtype = match &d.dtype {
            None => quote! { #ir::DType::F32 },
            Some(t) => {
                let v = match t.to_string().as_str() {
                    "f32" => "F32",
                    "f64" => "F64",
                    "f16" => "F16",
                    "bf16" => "BF16",
                    "i8" => "I8",
                    "i16" => "I16",
                    "i32" => "I32",
                    "i64" => "I64",
                    "u8" => "U8",
                    "u32" => "U32",
                    "bool" => "Bool",
                    other => {
                        return Err(Error::new_spanned(
                            t,
                            format!("unknown dtype `{other}` (f32, f64, f16, bf16, i8, i16, i32, i64, u8, u32, bool)"),
                        ));
                    }
                };
                let v = format_ident!("{v}");
                quote! { #ir::DType::#v }
            }
        };
        let dims: Vec<TokenStream> = d
            .dims
            .iter()
            .map(|x| match x {
                DimSpec::Static(n) => quote! { #ir::Dim::Static(#n) },
                DimSpec::Dynamic => quote! { #ir::Dim::dynamic() },
                DimSpec::Sym(s) => quote! { #ir::Dim::Sym(::std::string::String::from(#s)) },
            })
            .collect();
        let sh = d
            .dims
            .iter()
            .map(|x| match x {
                DimSpec::Static(n) => D::Static(*n),
                DimSpec::Dynamic => D::Sym("?".into()),
                DimSpec::Sym(s) => D::Sym(s.clone()),
            })
            .collect();
        let m = format_ident!("{}", if d.kind == SourceKind::Input { "input" } else { "param" });
        let id = format_ident!("__rlx_{}", name);
        self.stmts.push(quote! {
            let #id = __rlx_g.#m(#name, #ir::Shape::from_dims(&[#(#dims),*], #dtype));
        });
        self.env.insert(name, (id, Some(sh)));
        Ok(())
    }
}

/// Lower a whole program to an expression of type `rlx_ir::Graph` (`ir` is the path of the
/// `rlx_ir` crate as the caller sees it).
pub fn lower(p: &Program, ir: TokenStream) -> Result<TokenStream> {
    let mut l = Lower { ir: ir.clone(), stmts: vec![], env: HashMap::new(), next: 0 };
    let mut name = "rlx".to_string();
    let mut outs: Option<Vec<Ident>> = None;
    for item in &p.items {
        match item {
            Item::Graph(s) => name = s.value(),
            Item::Source(d) => l.source(d)?,
            Item::Let(n, e) => {
                let v = l.expr(e)?;
                let (id, sh) = l.node(&v, None);
                l.env.insert(n.to_string(), (id, sh));
            }
            Item::Out(names) => {
                let mut ids = vec![];
                for n in names {
                    match l.env.get(&n.to_string()) {
                        Some((i, _)) => ids.push(i.clone()),
                        None => {
                            return Err(Error::new_spanned(
                                n,
                                format!(
                                    "unknown identifier `{n}`: declare it with `input`, `param` or `let` before using it"
                                ),
                            ));
                        }
                    }
                }
                outs.get_or_insert_with(Vec::new).extend(ids);
            }
        }
    }
    let Some(outs) = outs else {
        return Err(Error::new(
            Span::call_site(),
            "missing `out`: end the graph with `out NAME;` naming its outputs (e.g. `out y;`)",
        ));
    };
    let stmts = &l.stmts;
    Ok(quote! {
        {
            let mut __rlx_g = #ir::Graph::new(#name);
            #(#stmts)*
            __rlx_g.set_outputs(::std::vec![#(#outs),*]);
            __rlx_g
        }
    })
}
